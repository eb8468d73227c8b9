"""toolgate's own names are reserved (review N14): no agent, approver or tenant is named like a
stage's, an operator's or the MCP door's Kafka principal, an ACL plan gives one principal one
role, and the MCP door's principal is in the plan."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka.admin import AclOperation, ResourcePatternType, ResourceType

from toolgate.ops.acls import DOOR_PRINCIPAL, STAGE_RIGHTS, AclPlan, ApprovalService, McpDoor, bindings
from toolgate.trust.agent_keys import check_name, reserved

READ, WRITE, DESCRIBE = AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE
LITERAL, PREFIXED = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.BROKER


@pytest.mark.parametrize("kind", ["agent", "approver", "tenant"])
@pytest.mark.parametrize(
    "name", ["toolgate", "toolgate-execution", "toolgate-operator", "toolgate-mcp", "toolgate-anything", "toolgate_x"]
)
def test_toolgates_own_names_are_refused(kind: str, name: str) -> None:
    assert reserved(name)
    with pytest.raises(ValueError, match="reserved"):
        check_name(kind, name)


@pytest.mark.parametrize("name", ["cli", "globex-cli", "toolgateway", "my-toolgate", "tool-gate"])
def test_other_names_are_not_reserved(name: str) -> None:
    assert not reserved(name) and check_name("agent", name) == name


def test_every_default_principal_of_toolgate_is_reserved() -> None:
    defaults = [AclPlan(tenants=()).stage_principal(stage) for stage in STAGE_RIGHTS]
    defaults += ["User:toolgate-operator", DOOR_PRINCIPAL]
    assert all(reserved(p.split(":", 1)[1]) for p in defaults)


@pytest.mark.parametrize(
    ("plan_kwargs", "message"),
    [
        ({"agents": {"acme": ("User:toolgate-execution",)}}, "'User:toolgate-execution' is a stage and an agent"),
        ({"agents": {"acme": ("User:toolgate-x",)}}, "has a name reserved for toolgate's own principals"),
        ({"agents": {"acme": ("User:ops",)}, "operators": ("User:ops",)}, "is an agent and an operator"),
        ({"agents": {"acme": ("User:desk",)}, "approval_services": (ApprovalService("User:desk"),)}, "one role"),
        ({"doors": (McpDoor("User:cli"),), "agents": {"acme": ("User:cli",)}}, "is an agent and the MCP door"),
        ({"operators": ("User:toolgate-policy",)}, "is a stage and an operator"),
        ({"doors": (McpDoor("User:door", ("initech",)),)}, "MCP door User:door limited to unknown tenant"),
    ],
)
def test_a_plan_in_which_a_principal_has_two_roles_or_an_agent_a_reserved_name_is_refused(
    plan_kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        AclPlan(tenants=("acme",), **plan_kwargs)


def test_stages_may_share_one_principal() -> None:
    shared = AclPlan(tenants=("acme",), stage_principals=dict.fromkeys(STAGE_RIGHTS, "User:CN=toolgate-stages"))
    assert {b.principal for b in bindings(shared)} == {"User:CN=toolgate-stages"}


def of(principal: str, plan: AclPlan) -> set[tuple[Any, str, Any, Any]]:
    return {
        (b.restype, b.name, b.resource_pattern_type, b.operation) for b in bindings(plan) if b.principal == principal
    }


def test_the_mcp_door_proposes_and_reads_the_observations_of_the_tenants_it_serves() -> None:
    common = {
        (TOPIC, "tool.proposals", LITERAL, WRITE),
        (TOPIC, "tool.proposals", LITERAL, DESCRIBE),
        (TOPIC, "tool.approvals.decisions", LITERAL, WRITE),  # its agents' signed withdrawals
        (GROUP, "toolgate-observer-", PREFIXED, READ),
        (CLUSTER, "kafka-cluster", LITERAL, AclOperation.IDEMPOTENT_WRITE),
    }
    every = AclPlan(tenants=("acme", "globex"), doors=(McpDoor(),))
    assert of(DOOR_PRINCIPAL, every) == common | {
        (TOPIC, "tool.observations.", PREFIXED, READ),
        (TOPIC, "tool.observations.", PREFIXED, DESCRIBE),
    }
    acme_only = AclPlan(tenants=("acme", "globex"), doors=(McpDoor("User:door-acme", ("acme",)),))
    assert of("User:door-acme", acme_only) == common | {
        (TOPIC, "tool.observations.acme", LITERAL, READ),
        (TOPIC, "tool.observations.acme", LITERAL, DESCRIBE),
    }
