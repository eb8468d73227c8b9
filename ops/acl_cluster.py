"""The ACL plan against a deployment (ops/acls.py makes the bindings, purely): the plan for what
Postgres registers (`plan_from_registry`), the bindings printed for `--dry-run`, and created on
the cluster through an AdminClient (`apply`: the caller needs ALTER on the cluster, a super user
or an admin principal). `--prune` deletes what the plan no longer has (ops/acl_prune.py)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from toolgate.kafka_security import ADMIN, client_config
from toolgate.ops.acls import AclPlan, ApprovalService, McpDoor
from toolgate.ops.agents import list_agents, registered_tenants
from toolgate.settings import Settings
from toolgate.states import RegistryStatus


def agent_principal(agent_id: str) -> str:
    """The Kafka principal an agent authenticates as (its SASL user is its agent id)."""
    return f"User:{agent_id}"


def _limited(spec: str) -> tuple[str, tuple[str, ...] | None]:
    """`Type:name` (every tenant) or `Type:name=tenant1,tenant2`: the principal and its tenants."""
    principal, _, limited = spec.partition("=")
    return principal, tuple(t for t in limited.split(",") if t) or None


def plan_from_registry(
    settings: Settings, approval_services: Iterable[str], operators: Iterable[str], doors: Iterable[str] = ()
) -> AclPlan:
    """The plan for the tenants and active agents registered in Postgres (a revoked agent has
    none: `--prune` removes what it had). An approval service or MCP door is given as
    `Type:name` or `Type:name=tenant1,tenant2` (limited to those tenants)."""
    agents: dict[str, list[str]] = {}
    for agent in list_agents(settings):
        if agent["status"] == RegistryStatus.ACTIVE:
            agents.setdefault(agent["tenant"], []).append(agent_principal(agent["agent"]))
    return AclPlan(
        tenants=tuple(registered_tenants(settings.database_url)),
        agents={tenant: tuple(principals) for tenant, principals in agents.items()},
        approval_services=tuple(ApprovalService(*_limited(spec)) for spec in approval_services),
        operators=tuple(operators),
        prefix=settings.topic_prefix,
        doors=tuple(McpDoor(*_limited(spec)) for spec in doors),
    )


def format_line(b: AclBinding) -> str:
    """One binding as `ALLOW <principal> <OPERATION> <TYPE> <PATTERN> <name> from <host>`."""
    return f"{' '.join(_words(b))} from {b.host}"


def _words(b: AclBinding) -> tuple[str, str, str, str, str, str]:
    """A binding's permission, principal, operation, resource type, pattern type and resource
    name, as its enums name them (the binding holds them as enums; their `_int` twins are typed)."""
    return (
        AclPermissionType(b.permission_type_int).name,
        b.principal,
        AclOperation(b.operation_int).name,
        ResourceType(b.restype_int).name,
        ResourcePatternType(b.resource_pattern_type_int).name,
        b.name,
    )


def format_lines(acls: Iterable[AclBinding]) -> list[str]:
    """Readable lines, one per binding, in columns (for `--dry-run`)."""
    rows = [_words(b) for b in acls]
    if not rows:
        return []
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    return [
        " ".join(cell.ljust(width) for cell, width in zip(row[:5], widths, strict=True)) + " " + row[5] for row in rows
    ]


class AclApplyError(RuntimeError):
    """Some bindings were not created; the message lists each with the broker's reason."""

    def __init__(self, failures: list[str], created: list[str]) -> None:
        self.failures = failures
        self.created = created
        super().__init__(
            f"{len(failures)} of {len(failures) + len(created)} ACL bindings failed:\n" + "\n".join(failures)
        )


def apply(admin: AdminClient, acls: list[AclBinding], timeout: float = 30.0) -> list[str]:
    """Create the bindings (creating an existing one is a no-op in Kafka); returns the lines
    of those created. Raises AclApplyError naming every failure.

    Not for the embedded Tansu broker: Tansu 0.6.0 has no authorizer and answers CreateAcls
    with an empty response, on which librdkafka 2.16 aborts the whole process (SIGABRT, an
    assertion in rd_kafka_admin_response_parse) before any Python error can be raised."""
    if not acls:
        return []
    futures = admin.create_acls(list(acls), request_timeout=timeout)
    return settle(futures, [(binding, binding) for binding in acls], timeout)


def settle(futures: Mapping[Any, Any], asked: Iterable[tuple[Any, AclBinding]], timeout: float) -> list[str]:
    """Wait for the admin client's answer to each request (`asked`: the key of its future, the
    binding it is about); the bindings done, or AclApplyError naming every failure."""
    done: list[str] = []
    failures: list[str] = []
    for request, binding in asked:
        future = futures.get(request)
        try:
            if future is None:
                raise LookupError("the broker's answer does not mention it")
            future.result(timeout)
            done.append(format_line(binding))
        except Exception as exc:  # confluent-kafka raises KafkaException wrapping a KafkaError
            failures.append(f"{format_line(binding)}: {exc}")
    if failures:
        raise AclApplyError(failures, done)
    return done


def admin_for(settings: Settings) -> AdminClient:
    """An admin client of the deployment's Kafka, as this process's principal (on a secured
    home, its admin: toolgate.kafka_security `home_security`)."""
    return AdminClient({**client_config(settings, ADMIN), "bootstrap.servers": settings.kafka_bootstrap})


def apply_to(settings: Settings, acls: list[AclBinding]) -> list[str]:
    """Create the bindings on the deployment's Kafka (as this process's principal)."""
    return apply(admin_for(settings), acls)
