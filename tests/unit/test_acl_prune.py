"""`setup --acls --prune` (ops/acl_prune.py): which bindings a broker holds are deleted because the
plan no longer has them (review N14), and which are left to the cluster's administrator."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from toolgate.ops.acl_cluster import AclApplyError, format_line
from toolgate.ops.acl_prune import delete, stale
from toolgate.ops.acls import AclPlan, ApprovalService, McpDoor, binding_order, bindings

READ, WRITE = AclOperation.READ, AclOperation.WRITE
LITERAL, PREFIXED = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.BROKER

ACME_AGENT = "User:acme-agent"
REVOKED_AGENT = "User:acme-old"
GLOBEX_AGENT = "User:globex-agent"
OTHER_APP = "User:billing-app"


def plan(*acme_agents: str, prefix: str = "") -> AclPlan:
    return AclPlan(
        tenants=("acme", "globex"),
        agents={"acme": acme_agents, "globex": (GLOBEX_AGENT,)},
        approval_services=(ApprovalService("User:approvals", ("acme",)),),
        operators=("User:toolgate-operator",),
        doors=(McpDoor(),),
        prefix=prefix,
    )


NOW = bindings(plan(ACME_AGENT))
BEFORE = bindings(plan(ACME_AGENT, REVOKED_AGENT))  # what an earlier `setup --acls` created


def allow(principal: str, restype: ResourceType, name: str, operation: AclOperation, **kw: object) -> AclBinding:
    pattern = kw.get("pattern", LITERAL)
    permission = kw.get("permission", AclPermissionType.ALLOW)
    return AclBinding(restype, name, pattern, principal, str(kw.get("host", "*")), operation, permission)  # type: ignore[arg-type]


def of(principal: str, acls: list[AclBinding]) -> list[AclBinding]:
    return [b for b in acls if b.principal == principal]


def test_nothing_is_pruned_when_the_broker_holds_the_plan() -> None:
    assert stale(NOW, NOW, "") == []


def test_a_revoked_agent_loses_every_binding_it_had() -> None:
    gone = stale(BEFORE, NOW, "")
    assert gone == of(REVOKED_AGENT, BEFORE)
    assert {(ResourceType(b.restype_int), b.name) for b in gone} == {
        (TOPIC, "tool.proposals"),
        (TOPIC, "tool.observations.acme"),
        (GROUP, "toolgate-observer-"),
        (CLUSTER, "kafka-cluster"),
    }


def test_a_right_the_plan_does_not_give_a_planned_principal_is_pruned() -> None:
    extra = [
        allow(ACME_AGENT, TOPIC, "tool.observations.globex", READ),
        allow(ACME_AGENT, TOPIC, "tool.observations.", READ, pattern=PREFIXED),
        allow(ACME_AGENT, TOPIC, "tool.proposals", WRITE, host="10.0.0.7"),
        allow("User:toolgate-execution", TOPIC, "tool.proposals", READ),
        allow("User:toolgate-validation", GROUP, "toolgate-retired-stage", READ),
    ]
    assert stale([*NOW, *extra], NOW, "") == sorted(extra, key=binding_order)


def test_deny_bindings_and_what_is_not_toolgates_are_left_alone() -> None:
    foreign = [
        allow(ACME_AGENT, TOPIC, "tool.proposals", WRITE, permission=AclPermissionType.DENY),
        allow(OTHER_APP, TOPIC, "orders", WRITE),
        allow(OTHER_APP, GROUP, "billing", READ),
        allow(OTHER_APP, CLUSTER, "kafka-cluster", AclOperation.IDEMPOTENT_WRITE),
        allow(OTHER_APP, GROUP, "toolgate-observer-", READ, pattern=PREFIXED),  # never held a toolgate topic
        allow("User:admin", TOPIC, "tool", READ, pattern=PREFIXED),  # broader than toolgate's: the admin's
        allow("User:admin", TOPIC, "*", READ),
    ]
    assert stale([*NOW, *foreign], NOW, "") == []


def test_a_removed_principal_that_works_elsewhere_keeps_the_shared_bindings() -> None:
    """A revoked agent that is also another application's principal loses toolgate's topics,
    but not the client group prefix and IDEMPOTENT_WRITE that the other application may need."""
    elsewhere = allow(REVOKED_AGENT, TOPIC, "orders", READ)
    gone = stale([*BEFORE, elsewhere], NOW, "")
    assert {ResourceType(b.restype_int) for b in gone} == {TOPIC}
    assert {b.name for b in gone} == {"tool.proposals", "tool.observations.acme"}


def test_another_deployments_bindings_on_the_same_cluster_are_not_pruned() -> None:
    prod, staging = bindings(plan(ACME_AGENT, prefix="prod-")), bindings(plan(ACME_AGENT, REVOKED_AGENT, prefix="s-"))
    assert stale([*prod, *staging], prod, "prod-") == []
    # The other deployment's own prune removes its revoked agent, and only it.
    assert {b.principal for b in stale([*prod, *staging], bindings(plan(ACME_AGENT, prefix="s-")), "s-")} == {
        REVOKED_AGENT
    }


def test_the_prune_of_a_prefixed_deployment_names_only_its_own_topics() -> None:
    before = bindings(plan(ACME_AGENT, REVOKED_AGENT, prefix="prod-"))
    gone = stale(before, bindings(plan(ACME_AGENT, prefix="prod-")), "prod-")
    assert {b.name for b in gone if ResourceType(b.restype_int) == TOPIC} == {
        "prod-tool.proposals",
        "prod-tool.observations.acme",
    }


class FakeAdmin:
    """Stands in for AdminClient.delete_acls: a future per filter, some failing."""

    def __init__(self, fail: set[str]) -> None:
        self.fail = fail
        self.filters: list[AclBindingFilter] = []

    def delete_acls(self, filters: list[AclBindingFilter], request_timeout: float) -> dict[AclBindingFilter, Any]:
        self.filters += filters
        out: dict[AclBindingFilter, Future[list[AclBinding]]] = {}
        for f in filters:
            future: Future[list[AclBinding]] = Future()
            if f.principal in self.fail:
                future.set_exception(KafkaException(KafkaError(KafkaError.CLUSTER_AUTHORIZATION_FAILED)))
            else:
                future.set_result([f])
            out[f] = future
        return out


def test_delete_matches_each_stale_binding_exactly_and_names_every_failure() -> None:
    gone = stale(BEFORE, NOW, "")
    admin = FakeAdmin(fail=set())
    assert delete(admin, gone) == [format_line(b) for b in gone]  # type: ignore[arg-type]
    assert [(f.restype, f.name, f.resource_pattern_type, f.principal, f.host, f.operation) for f in admin.filters] == [
        (b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation) for b in gone
    ]
    assert all(f.permission_type == AclPermissionType.ALLOW for f in admin.filters)  # never ANY, never MATCH
    assert delete(admin, []) == []  # type: ignore[arg-type]
    extra = allow(GLOBEX_AGENT, TOPIC, "tool.observations.acme", READ)
    with pytest.raises(AclApplyError) as info:
        delete(FakeAdmin(fail={GLOBEX_AGENT}), [*gone, extra])  # type: ignore[arg-type]
    assert info.value.failures == [
        f"{format_line(extra)}: {KafkaException(KafkaError(KafkaError.CLUSTER_AUTHORIZATION_FAILED))}"
    ]
    assert len(info.value.created) == len(gone)
