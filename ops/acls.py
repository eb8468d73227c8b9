"""The Kafka ACL bindings a secured deployment needs: who may read and write which topic.

toolgate's trust boundary on a real Kafka (with an authorizer) is drawn by these bindings:
an agent may propose and read its own tenant's observations, an approval service reads the
confirmation packets of the tenants it serves and writes decisions, each stage reads exactly
its inputs and writes exactly its outputs, the MCP door proposes for the agents it serves and
reads their tenants' observations, and operators work the dead letters. `bindings()` is a pure
function of an `AclPlan`; ops/acl_cluster.py makes the plan from the registry, prints the
bindings for `--dry-run` and creates them on the cluster, and `--prune` deletes the bindings the
plan no longer has (ops/acl_prune.py).

| principal        | topics (LITERAL unless noted)                                  | groups (`*`: PREFIXED)    |
|------------------|----------------------------------------------------------------|---------------------------|
| agent of T       | WRITE+DESCRIBE proposals; READ+DESCRIBE observations.T         | READ toolgate-observer-*  |
| approval service | READ approvals.requested.T of its tenants (all tenants: the    | READ toolgate-observer-*  |
|                  | PREFIXED family); WRITE approvals.decisions                    |                           |
| stage            | READ its inputs, WRITE its outputs (STAGE_RIGHTS); per-tenant  | READ P+toolgate-<stage>   |
|                  | families PREFIXED                                              |                           |
| MCP door         | WRITE+DESCRIBE proposals; READ+DESCRIBE observations.T of its  | READ toolgate-observer-*  |
|                  | tenants (all tenants: the PREFIXED family); WRITE              |                           |
|                  | approvals.decisions (its agents' signed withdrawals)           |                           |
| operator         | READ+WRITE deadletter, proposals and the internal topics       | READ toolgate-dlq-*       |
| reconciliation   | (beyond its stage rights) READ what the stages read and the     | DESCRIBE stage groups,    |
|                  | deadletter, for its gauges (ops/gauges.py: lag, open letters)   | toolgate-status/gauges-*  |

Every principal that writes also gets IDEMPOTENT_WRITE on the cluster: toolgate's
confluent-kafka producers (agents' `ToolgateClient`, approval services, `dlq replay`, the
outbox relay) are idempotent, and brokers before Kafka 3.0 (KIP-679) require that right.

Why the patterns are what they are:
* A tenant's own topic is named LITERAL: a PREFIXED `tool.observations.acme` would also
  match `tool.observations.acme2`, another tenant's topic.
* A stage or an unrestricted approval service serves every tenant, so it gets the family
  PREFIXED with its trailing dot (`tool.observations.`): a tenant added later needs new
  bindings for its agents only.
* Clients that read with `assign()` (agents, approval services, `dlq`, the gauges) still carry a
  group id with a random suffix, never prefixed by the deployment: hence PREFIXED group
  bindings on `CLIENT_GROUP_PREFIXES` (`toolgate-observer-`, `-dlq-`, `-status-`, `-gauges-`).

One principal has one role: a plan in which an agent is also a stage, the door, an operator or
an approval service (the union of both rights) is refused, and so is an agent whose name is
toolgate's own (`toolgate-*`, toolgate.trust.agent_keys.reserved): stages are `User:toolgate-<stage>`,
the operator `User:toolgate-operator` and the door `User:toolgate-mcp` unless told otherwise.

Topic names come from the catalog (toolgate.topics.catalog), under the deployment prefix.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from toolgate.topics.catalog import BY_LOGICAL, Topics, stage_group
from toolgate.trust.agent_keys import reserved

OBSERVER_GROUP_PREFIX = "toolgate-observer-"
DLQ_GROUP_PREFIX = "toolgate-dlq-"
STATUS_GROUP_PREFIX = "toolgate-status-"  # ops/lag.py's readers of partitions' ends
GAUGES_GROUP_PREFIX = "toolgate-gauges-"  # ops/gauge_readers.py's reader of the dead letters
CLIENT_GROUP_PREFIXES = (OBSERVER_GROUP_PREFIX, DLQ_GROUP_PREFIX, STATUS_GROUP_PREFIX, GAUGES_GROUP_PREFIX)
CLUSTER = "kafka-cluster"  # the name of the cluster resource (ResourceType.BROKER in librdkafka)
OPERATOR_PRINCIPAL = "User:toolgate-operator"  # `setup --acls` without --operator
DOOR_PRINCIPAL = "User:toolgate-mcp"  # `setup --acls` without --door

READ, WRITE, DESCRIBE = AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE
LITERAL, PREFIXED = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED


@dataclass(frozen=True)
class StageRights:
    """A stage's topics by logical catalog name; per-tenant ones mean every tenant's."""

    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    consumes_with_group: bool = True


STAGE_RIGHTS: Mapping[str, StageRights] = {
    "validation": StageRights(reads=("proposals",), writes=("validated", "results", "deadletter")),
    "policy": StageRights(reads=("validated",), writes=("authorized", "results", "deadletter")),
    # Calls that need no approval go straight on to executable; a call that fails alone is
    # answered on results; held calls, packets and releases go through the outbox.
    "approval-wait": StageRights(
        reads=("authorized", "approvals_decisions"), writes=("executable", "results", "deadletter")
    ),
    # Results go through the outbox; execution publishes its own once committed (the relay
    # those a crash left), and the answer to a call that failed on its own.
    "execution": StageRights(reads=("executable",), writes=("results", "deadletter")),
    # Publishes what the other stages put in the outbox; reads Postgres, not Kafka.
    "outbox-relay": StageRights(
        writes=("executable", "results", "deadletter", "approvals_requested", "proposals"), consumes_with_group=False
    ),
    "normalization": StageRights(reads=("results",), writes=("observations", "deadletter")),
    # Reads Postgres and the tools; its output goes through the outbox.
    "reconciliation": StageRights(consumes_with_group=False),
}

OPERATOR_TOPICS = ("deadletter", "proposals", "validated", "authorized", "executable", "results")


@dataclass(frozen=True)
class ApprovalService:
    """An approval service's principal; `tenants=None` serves every tenant."""

    principal: str
    tenants: tuple[str, ...] | None = None


@dataclass(frozen=True)
class McpDoor:
    """The MCP front door's principal (`toolgate mcp --http`), which proposes for every agent it
    serves; `tenants=None` serves every tenant."""

    principal: str = DOOR_PRINCIPAL
    tenants: tuple[str, ...] | None = None


@dataclass(frozen=True)
class AclPlan:
    """Who is who in one deployment: the inputs of `bindings()`."""

    tenants: tuple[str, ...]
    agents: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # tenant -> principals
    approval_services: tuple[ApprovalService, ...] = ()
    operators: tuple[str, ...] = ()
    prefix: str = ""  # the deployment's topic prefix (TOOLGATE_TOPIC_PREFIX)
    stage_principals: Mapping[str, str] = field(default_factory=dict)  # stage -> principal overrides
    doors: tuple[McpDoor, ...] = ()

    def __post_init__(self) -> None:
        problems = [f"agents of unknown tenant {t!r}" for t in self.agents if t not in self.tenants]
        limited = [("approval service", s.principal, s.tenants) for s in self.approval_services]
        limited += [("MCP door", d.principal, d.tenants) for d in self.doors]
        problems += [
            f"{kind} {principal} limited to unknown tenant {t!r}"
            for kind, principal, tenants in limited
            for t in tenants or ()
            if t not in self.tenants
        ]
        problems += [
            f"principal override for unknown stage {s!r}" for s in self.stage_principals if s not in STAGE_RIGHTS
        ]
        roles = self.roles()
        problems += [f"principal {p!r} is not of the form Type:name" for p in roles if ":" not in p]
        problems += [
            f"principal {p!r} is {' and '.join(sorted(r))}: one principal, one role"
            for p, r in roles.items()
            if len(r) > 1
        ]
        problems += [
            f"agent principal {p!r} has a name reserved for toolgate's own principals (toolgate-*): "
            "revoke the agent and register it under another id"
            for ps in self.agents.values()
            for p in ps
            if reserved(p.split(":", 1)[-1])
        ]
        if problems:
            raise ValueError("ACL plan: " + "; ".join(problems))

    def roles(self) -> dict[str, set[str]]:
        """Every principal of the plan, with the kinds of principal it is (a stage's default
        principal included)."""
        named = [("an agent", p) for ps in self.agents.values() for p in ps]
        named += [("an approval service", s.principal) for s in self.approval_services]
        named += [("an operator", p) for p in self.operators]
        named += [("the MCP door", d.principal) for d in self.doors]
        named += [("a stage", self.stage_principal(stage)) for stage in STAGE_RIGHTS]
        roles: dict[str, set[str]] = {}
        for kind, principal in named:
            roles.setdefault(principal, set()).add(kind)
        return roles

    def stage_principal(self, stage: str) -> str:
        return self.stage_principals.get(stage, f"User:toolgate-{stage}")


def _topic(principal: str, name: str, pattern: ResourcePatternType, operation: AclOperation) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, name, pattern, principal, "*", operation, AclPermissionType.ALLOW)


def _group(principal: str, name: str, pattern: ResourcePatternType, operation: AclOperation = READ) -> AclBinding:
    return AclBinding(ResourceType.GROUP, name, pattern, principal, "*", operation, AclPermissionType.ALLOW)


def _idempotent_write(principal: str) -> AclBinding:
    return AclBinding(
        ResourceType.BROKER, CLUSTER, LITERAL, principal, "*", AclOperation.IDEMPOTENT_WRITE, AclPermissionType.ALLOW
    )


def _every_tenant(topics: Topics, logical: str) -> tuple[str, ResourcePatternType]:
    """The name and pattern of a topic, or of a per-tenant family (`tool.observations.`)."""
    if BY_LOGICAL[logical].per_tenant:
        return f"{topics.prefix}{BY_LOGICAL[logical].name}.", PREFIXED
    return topics.name(logical), LITERAL


def _stage(plan: AclPlan, topics: Topics, stage: str, rights: StageRights) -> list[AclBinding]:
    principal = plan.stage_principal(stage)
    out = [_topic(principal, *_every_tenant(topics, logical), READ) for logical in rights.reads]
    out += [_topic(principal, *_every_tenant(topics, logical), WRITE) for logical in rights.writes]
    if rights.consumes_with_group:
        out.append(_group(principal, stage_group(plan.prefix, stage), LITERAL))
    if rights.writes:
        out.append(_idempotent_write(principal))
    return out


def _gauges(plan: AclPlan, topics: Topics) -> list[AclBinding]:
    """What the reconciliation stage's gauges read (assigned, never committed): the topics the
    stages consume, to their ends, with DESCRIBE of each stage's group (never READ: it must not
    join one), and the dead letters, to count them. Their readers' random group ids take DESCRIBE
    of `toolgate-status-*` and `toolgate-gauges-*` (librdkafka asks for a group's coordinator)."""
    principal = plan.stage_principal("reconciliation")
    out = [_topic(principal, topics.deadletter, LITERAL, READ)]
    out += [_group(principal, prefix, PREFIXED, DESCRIBE) for prefix in (STATUS_GROUP_PREFIX, GAUGES_GROUP_PREFIX)]
    for stage, rights in STAGE_RIGHTS.items():
        if rights.consumes_with_group:
            out += [_topic(principal, *_every_tenant(topics, logical), READ) for logical in rights.reads]
            out.append(_group(principal, stage_group(plan.prefix, stage), LITERAL, DESCRIBE))
    return out


def _agent(topics: Topics, tenant: str, principal: str) -> list[AclBinding]:
    observations = topics.name("observations", tenant)
    return [
        _topic(principal, topics.name("proposals"), LITERAL, WRITE),
        _topic(principal, topics.name("proposals"), LITERAL, DESCRIBE),
        _topic(principal, observations, LITERAL, READ),
        _topic(principal, observations, LITERAL, DESCRIBE),
        _group(principal, OBSERVER_GROUP_PREFIX, PREFIXED),
        _idempotent_write(principal),
    ]


def _approval_service(topics: Topics, service: ApprovalService) -> list[AclBinding]:
    p = service.principal
    if service.tenants is None:
        out = [_topic(p, *_every_tenant(topics, "approvals_requested"), READ)]
    else:
        out = [_topic(p, topics.name("approvals_requested", t), LITERAL, READ) for t in service.tenants]
    return [
        *out,
        _topic(p, topics.name("approvals_decisions"), LITERAL, WRITE),
        _group(p, OBSERVER_GROUP_PREFIX, PREFIXED),
        _idempotent_write(p),
    ]


def _door(topics: Topics, door: McpDoor) -> list[AclBinding]:
    p = door.principal
    if door.tenants is None:
        reads = [_topic(p, *_every_tenant(topics, "observations"), op) for op in (READ, DESCRIBE)]
    else:
        reads = [_topic(p, topics.name("observations", t), LITERAL, o) for t in door.tenants for o in (READ, DESCRIBE)]
    return [
        *(_topic(p, topics.name("proposals"), LITERAL, op) for op in (WRITE, DESCRIBE)),
        _topic(p, topics.name("approvals_decisions"), LITERAL, WRITE),  # withdrawals, signed by the agent
        *reads,
        _group(p, OBSERVER_GROUP_PREFIX, PREFIXED),
        _idempotent_write(p),
    ]


def _operator(topics: Topics, principal: str) -> list[AclBinding]:
    out = [_topic(principal, topics.name(t), LITERAL, op) for t in OPERATOR_TOPICS for op in (READ, WRITE)]
    return [*out, _group(principal, DLQ_GROUP_PREFIX, PREFIXED), _idempotent_write(principal)]


def binding_order(b: AclBinding) -> tuple[str, int, str, int, int, str]:
    return (b.principal, b.restype_int, b.name, b.resource_pattern_type_int, b.operation_int, b.host)


def bindings(plan: AclPlan) -> list[AclBinding]:
    """Every ALLOW binding of the deployment, without duplicates, sorted by principal,
    resource type, resource name, pattern type and operation."""
    topics = Topics(plan.prefix)
    out: list[AclBinding] = []
    for stage, rights in STAGE_RIGHTS.items():
        out += _stage(plan, topics, stage, rights)
    out += _gauges(plan, topics)
    for tenant, principals in plan.agents.items():
        for principal in principals:
            out += _agent(topics, tenant, principal)
    for service in plan.approval_services:
        out += _approval_service(topics, service)
    for door in plan.doors:
        out += _door(topics, door)
    for principal in plan.operators:
        out += _operator(topics, principal)
    return sorted(set(out), key=binding_order)
