"""ACL bindings for a two-tenant deployment (acme, globex): who may touch which topic."""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AclBinding, AclOperation, ResourcePatternType, ResourceType

from toolgate.ops.acl_cluster import AclApplyError, apply, format_lines
from toolgate.ops.acls import STAGE_RIGHTS, AclPlan, ApprovalService, bindings
from toolgate.topics.catalog import BY_LOGICAL, CATALOG, Topics

READ, WRITE, DESCRIBE = AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE
IDEMPOTENT_WRITE = AclOperation.IDEMPOTENT_WRITE
LITERAL, PREFIXED = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.BROKER

ACME_AGENT = "User:acme-agent"
GLOBEX_AGENT = "User:globex-agent"
ACME_APPROVER = "User:acme-approver"
ANY_APPROVER = "User:approval-desk"
OPERATOR = "User:oncall"

PLAN = AclPlan(
    tenants=("acme", "globex"),
    agents={"acme": (ACME_AGENT,), "globex": (GLOBEX_AGENT,)},
    approval_services=(ApprovalService(ACME_APPROVER, ("acme",)), ApprovalService(ANY_APPROVER)),
    operators=(OPERATOR,),
)
ALL = bindings(PLAN)


def of(principal: str, acls: Iterable[AclBinding] = ALL) -> set[tuple[Any, str, Any, Any]]:
    """(resource type, name, pattern, operation) of every binding of one principal."""
    return {(b.restype, b.name, b.resource_pattern_type, b.operation) for b in acls if b.principal == principal}


def matches(binding: AclBinding, restype: ResourceType, name: str) -> bool:
    """Whether the binding covers a concrete resource, as Kafka's authorizer decides it."""
    if binding.restype != restype:
        return False
    if binding.resource_pattern_type == LITERAL:
        return binding.name == name
    return name.startswith(binding.name)


def may(principal: str, operation: AclOperation, name: str, restype: ResourceType = TOPIC) -> bool:
    implied = {READ, WRITE} if operation == DESCRIBE else set()  # Kafka: READ or WRITE imply DESCRIBE
    return any(
        b.principal == principal and b.operation in {operation, *implied} and matches(b, restype, name) for b in ALL
    )


def test_every_binding_is_an_allow_from_any_host_and_there_are_no_duplicates() -> None:
    assert all(b.permission_type.name == "ALLOW" and b.host == "*" for b in ALL)
    assert len(ALL) == len(set(ALL))
    assert bindings(PLAN) == ALL  # deterministic
    reordered = AclPlan(
        tenants=("globex", "acme"),
        agents={"globex": (GLOBEX_AGENT,), "acme": (ACME_AGENT, ACME_AGENT)},
        approval_services=(ApprovalService(ANY_APPROVER), ApprovalService(ACME_APPROVER, ("acme",))),
        operators=(OPERATOR, OPERATOR),
    )
    assert bindings(reordered) == ALL


def test_an_agent_proposes_and_reads_only_its_own_tenants_observations() -> None:
    assert of(ACME_AGENT) == {
        (TOPIC, "tool.proposals", LITERAL, WRITE),
        (TOPIC, "tool.proposals", LITERAL, DESCRIBE),
        (TOPIC, "tool.observations.acme", LITERAL, READ),
        (TOPIC, "tool.observations.acme", LITERAL, DESCRIBE),
        (GROUP, "toolgate-observer-", PREFIXED, READ),
        (CLUSTER, "kafka-cluster", LITERAL, IDEMPOTENT_WRITE),
    }
    assert may(ACME_AGENT, READ, "tool.observations.acme")
    assert may(GLOBEX_AGENT, READ, "tool.observations.globex")
    for name in ("tool.observations.globex", "tool.observations.acme2", "tool.approvals.requested.acme"):
        assert not may(ACME_AGENT, READ, name), name
    assert not may(GLOBEX_AGENT, READ, "tool.observations.acme")
    assert not may(ACME_AGENT, WRITE, "tool.observations.acme")


def test_no_binding_lets_anyone_but_normalization_write_observations_or_read_another_tenants() -> None:
    acme_readers = {b.principal for b in ALL if b.operation == READ and matches(b, TOPIC, "tool.observations.acme")}
    assert acme_readers == {ACME_AGENT}
    writers = {b.principal for b in ALL if b.operation == WRITE and matches(b, TOPIC, "tool.observations.acme")}
    assert writers == {"User:toolgate-normalization"}


def test_approval_services_read_the_packets_of_their_tenants_and_write_decisions() -> None:
    assert may(ACME_APPROVER, READ, "tool.approvals.requested.acme")
    assert not may(ACME_APPROVER, READ, "tool.approvals.requested.globex")
    assert may(ANY_APPROVER, READ, "tool.approvals.requested.globex")
    assert may(ANY_APPROVER, READ, "tool.approvals.requested.initech")  # a tenant added later
    for approver in (ACME_APPROVER, ANY_APPROVER):
        assert may(approver, WRITE, "tool.approvals.decisions")
        assert not may(approver, READ, "tool.approvals.decisions")
        assert not may(approver, READ, "tool.observations.acme")
        assert not may(approver, WRITE, "tool.proposals")
        assert may(approver, READ, "toolgate-observer-1a2b3c4d", GROUP)


INTERNAL_AND_EDGE = [t.name for t in CATALOG if not t.per_tenant] + [
    f"{t.name}.{tenant}" for t in CATALOG if t.per_tenant for tenant in ("acme", "globex")
]

STAGE_IO: list[tuple[str, set[str], set[str]]] = [
    ("validation", {"tool.proposals"}, {"tool.validated", "tool.results", "tool.deadletter"}),
    ("policy", {"tool.validated"}, {"tool.authorized", "tool.results", "tool.deadletter"}),
    (
        "approval-wait",
        {"tool.authorized", "tool.approvals.decisions"},
        {"tool.executable", "tool.results", "tool.deadletter"},
    ),
    ("execution", {"tool.executable"}, {"tool.results", "tool.deadletter"}),
    (
        "outbox-relay",
        set(),
        {
            "tool.proposals",  # an approver's edited call, re-entered by approval-wait (issue 52, part 3)
            "tool.executable",
            "tool.results",
            "tool.deadletter",
            "tool.approvals.requested.acme",
            "tool.approvals.requested.globex",
        },
    ),
    ("normalization", {"tool.results"}, {"tool.observations.acme", "tool.observations.globex", "tool.deadletter"}),
    # It reads nothing to act on; its gauges read what the stages read, to measure their lag, and
    # the dead letters, to count the open ones.
    (
        "reconciliation",
        {"tool.proposals", "tool.validated", "tool.authorized", "tool.approvals.decisions", "tool.executable"}
        | {"tool.results", "tool.deadletter"},
        set(),
    ),
]


@pytest.mark.parametrize(("stage", "reads", "writes"), STAGE_IO, ids=[s[0] for s in STAGE_IO])
def test_every_stage_reads_exactly_its_inputs_and_writes_exactly_its_outputs(
    stage: str, reads: set[str], writes: set[str]
) -> None:
    principal = f"User:toolgate-{stage}"
    assert {t for t in INTERNAL_AND_EDGE if may(principal, READ, t)} == reads
    assert {t for t in INTERNAL_AND_EDGE if may(principal, WRITE, t)} == writes
    groups = {b.name for b in ALL if b.principal == principal and b.restype == GROUP and b.operation == READ}
    assert groups == ({f"toolgate-{stage}"} if reads and stage != "reconciliation" else set())
    assert may(principal, IDEMPOTENT_WRITE, "kafka-cluster", CLUSTER) == bool(writes)
    described = {b.name for b in ALL if b.principal == principal and b.operation == DESCRIBE}
    # The gauges' assigning readers carry a random group id: librdkafka asks for its coordinator.
    gauges = {f"toolgate-{s}" for s, r in STAGE_RIGHTS.items() if r.reads} | {"toolgate-status-", "toolgate-gauges-"}
    assert described == (gauges if stage == "reconciliation" else set())
    assert all(b.operation in {READ, WRITE, IDEMPOTENT_WRITE, DESCRIBE} for b in ALL if b.principal == principal)


def test_stage_rights_cover_every_stage_toolgate_runs() -> None:
    from toolgate.workers.stages import STAGES

    assert set(STAGE_RIGHTS) == set(STAGES)
    assert all(t in BY_LOGICAL for r in STAGE_RIGHTS.values() for t in (*r.reads, *r.writes))


def test_per_tenant_families_are_prefixed_with_their_trailing_dot_and_own_topics_literal() -> None:
    prefixed_topics = {b.name for b in ALL if b.restype == TOPIC and b.resource_pattern_type == PREFIXED}
    assert prefixed_topics == {"tool.observations.", "tool.approvals.requested."}
    tenant_topics = {"tool.observations.acme", "tool.observations.globex", "tool.approvals.requested.acme"}
    assert {b.resource_pattern_type for b in ALL if b.name in tenant_topics} == {LITERAL}
    assert tenant_topics <= {b.name for b in ALL}
    prefixed_groups = {b.name for b in ALL if b.restype == GROUP and b.resource_pattern_type == PREFIXED}
    assert prefixed_groups == {"toolgate-observer-", "toolgate-dlq-", "toolgate-status-", "toolgate-gauges-"}


def test_operators_work_dead_letters_replay_and_the_internal_topics() -> None:
    for name in ("tool.deadletter", "tool.proposals", "tool.validated", "tool.authorized", "tool.executable"):
        assert may(OPERATOR, READ, name) and may(OPERATOR, WRITE, name), name
    assert may(OPERATOR, READ, "tool.results")
    assert may(OPERATOR, READ, "toolgate-dlq-0011aabb", GROUP)
    assert not may(OPERATOR, READ, "tool.observations.acme")
    assert not may(OPERATOR, READ, "tool.approvals.requested.acme")


def test_the_deployment_prefix_is_on_every_topic_and_stage_group_but_not_on_assign_groups() -> None:
    plan = AclPlan(tenants=("acme",), agents={"acme": (ACME_AGENT,)}, operators=(OPERATOR,), prefix="prod-")
    acls = bindings(plan)
    assert all(b.name.startswith("prod-tool.") for b in acls if b.restype == TOPIC)
    groups = {b.name for b in acls if b.restype == GROUP}
    assert "prod-toolgate-validation" in groups and "toolgate-validation" not in groups
    assert {"toolgate-observer-", "toolgate-dlq-"} <= groups
    assert (TOPIC, Topics("prod-").name("observations", "acme"), LITERAL, READ) in of(ACME_AGENT, acls)


def test_stage_principals_can_be_overridden() -> None:
    plan = AclPlan(tenants=("acme",), stage_principals={"policy": "User:CN=policy.toolgate.internal"})
    acls = bindings(plan)
    assert (TOPIC, "tool.validated", LITERAL, READ) in of("User:CN=policy.toolgate.internal", acls)
    assert not of("User:toolgate-policy", acls)


@pytest.mark.parametrize(
    ("plan_kwargs", "message"),
    [
        ({"agents": {"initech": ("User:a",)}}, "agents of unknown tenant 'initech'"),
        ({"approval_services": (ApprovalService("User:x", ("initech",)),)}, "limited to unknown tenant"),
        ({"stage_principals": {"polcy": "User:p"}}, "unknown stage 'polcy'"),
        ({"operators": ("oncall",)}, "'oncall' is not of the form Type:name"),
    ],
)
def test_plans_that_name_unknown_things_are_refused(plan_kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AclPlan(tenants=("acme", "globex"), **plan_kwargs)


def test_format_lines_are_aligned_and_complete() -> None:
    lines = format_lines(bindings(AclPlan(tenants=(), agents={}, operators=())))
    assert lines[0].split() == [
        "ALLOW",
        "User:toolgate-approval-wait",
        "READ",
        "TOPIC",
        "LITERAL",
        "tool.approvals.decisions",
    ]
    assert len({line.index("TOPIC") for line in lines if " TOPIC " in line}) == 1
    assert format_lines([]) == []


class FakeAdmin:
    """Stands in for AdminClient.create_acls: one future per binding, some failing."""

    def __init__(self, fail: set[str]) -> None:
        self.fail = fail
        self.calls: list[tuple[list[AclBinding], float]] = []

    def create_acls(self, acls: list[AclBinding], request_timeout: float) -> dict[AclBinding, Future[None]]:
        self.calls.append((acls, request_timeout))
        out: dict[AclBinding, Future[None]] = {}
        for b in acls:
            future: Future[None] = Future()
            if b.principal in self.fail:
                future.set_exception(KafkaException(KafkaError(KafkaError.CLUSTER_AUTHORIZATION_FAILED)))
            else:
                future.set_result(None)
            out[b] = future
        return out


def test_apply_creates_every_binding_and_returns_the_lines() -> None:
    admin = FakeAdmin(fail=set())
    assert apply(admin, ALL, timeout=5.0) == format_lines_plain(ALL)  # type: ignore[arg-type]
    assert admin.calls == [(ALL, 5.0)]
    assert apply(admin, [], timeout=5.0) == []  # type: ignore[arg-type]
    assert len(admin.calls) == 1


def test_apply_names_every_failure() -> None:
    admin = FakeAdmin(fail={OPERATOR})
    with pytest.raises(AclApplyError) as info:
        apply(admin, ALL, timeout=5.0)  # type: ignore[arg-type]
    failed = [b for b in ALL if b.principal == OPERATOR]
    assert len(info.value.failures) == len(failed)
    assert len(info.value.created) == len(ALL) - len(failed)
    assert f"{len(failed)} of {len(ALL)} ACL bindings failed" in str(info.value)
    assert "User:oncall READ TOPIC LITERAL tool.deadletter" in str(info.value)
    assert "CLUSTER_AUTHORIZATION_FAILED" in str(info.value)


def format_lines_plain(acls: list[AclBinding]) -> list[str]:
    from toolgate.ops.acl_cluster import format_line

    return [format_line(b) for b in acls]
