"""What `toolgate setup --acls --prune` deletes: bindings on toolgate's resources that the plan lacks.

`setup --acls` creates the bindings of the plan (ops/acls.py), and creating never takes a right
away: a revoked agent would keep READ on its tenant's observations and WRITE on proposals
forever. `stale()` is the other half, a pure function of the bindings the broker holds and
those the plan wants; `existing()` reads the broker's and `delete()` removes exactly the stale
ones (the dry run prints them instead).

A binding is stale when it is an ALLOW the plan does not want, on a resource that is this
deployment's:

| resource                                      | pruned when not in the plan                       |
|-----------------------------------------------|---------------------------------------------------|
| a topic named `<prefix>tool.*` (LITERAL or    | always: every such topic is toolgate's            |
| PREFIXED)                                     |                                                   |
| a group named `<prefix>toolgate-*` (stages')  | always                                            |
| the client groups `toolgate-observer-*`,      | only for a principal that is this deployment's    |
| `toolgate-dlq-*` and the cluster's            | (planned, or holding a binding on its topics or   |
| IDEMPOTENT_WRITE, which every toolgate        | groups) and has no binding on anything else (it   |
| deployment of a cluster (and other clients)   | may serve another deployment or application)      |
| share                                         |                                                   |

DENY bindings are never pruned (they only take rights away), nor bindings on anything else:
other applications' topics and groups, another deployment's prefix, and broader patterns that
merely cover toolgate's topics (a PREFIXED `tool` or `*`) are the cluster administrator's.
"""

from __future__ import annotations

from collections.abc import Iterable

from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from toolgate.ops.acl_cluster import settle
from toolgate.ops.acls import CLIENT_GROUP_PREFIXES, binding_order

# Every binding the broker holds: the filter's None matches any name, principal and host
# (confluent-kafka's annotations say str).
EVERY_BINDING = AclBindingFilter(
    ResourceType.ANY,
    None,  # type: ignore[arg-type]
    ResourcePatternType.ANY,
    None,  # type: ignore[arg-type]
    None,  # type: ignore[arg-type]
    AclOperation.ANY,
    AclPermissionType.ANY,
)


def owned(binding: AclBinding, prefix: str) -> bool:
    """Whether a binding is on one of this deployment's own topics or stage groups."""
    restype = ResourceType(binding.restype_int)
    if restype == ResourceType.TOPIC:
        return binding.name.startswith(f"{prefix}tool.")
    if restype == ResourceType.GROUP:
        return binding.name.startswith(f"{prefix}toolgate-") and not shared(binding)
    return False


def shared(binding: AclBinding) -> bool:
    """Whether a binding is on what every toolgate deployment of the cluster shares: the client
    groups (never prefixed by a deployment) and the cluster's IDEMPOTENT_WRITE."""
    restype = ResourceType(binding.restype_int)
    if restype == ResourceType.GROUP:
        return binding.name.startswith(CLIENT_GROUP_PREFIXES)
    return restype == ResourceType.BROKER and AclOperation(binding.operation_int) == AclOperation.IDEMPOTENT_WRITE


def stale(existing: Iterable[AclBinding], planned: Iterable[AclBinding], prefix: str) -> list[AclBinding]:
    """The bindings of `existing` that `--prune` deletes (the module docstring's table), in the
    order `bindings()` sorts them."""
    wanted = set(planned)
    held = list(existing)
    ours = {b.principal for b in wanted} | {b.principal for b in held if owned(b, prefix)}
    elsewhere = {b.principal for b in held if not owned(b, prefix) and not shared(b)}

    def prunable(b: AclBinding) -> bool:
        if AclPermissionType(b.permission_type_int) != AclPermissionType.ALLOW or b in wanted:
            return False
        return owned(b, prefix) or (shared(b) and b.principal in ours and b.principal not in elsewhere)

    return sorted({b for b in held if prunable(b)}, key=binding_order)


def existing(admin: AdminClient, timeout: float = 30.0) -> list[AclBinding]:
    """Every binding the broker holds (the caller needs DESCRIBE on the cluster)."""
    found: list[AclBinding] = admin.describe_acls(EVERY_BINDING, request_timeout=timeout).result(timeout)
    return list(found)


def _exactly(binding: AclBinding) -> AclBindingFilter:
    """A filter that matches this one binding and nothing else (no ANY, no MATCH)."""
    return AclBindingFilter(
        ResourceType(binding.restype_int),
        binding.name,
        ResourcePatternType(binding.resource_pattern_type_int),
        binding.principal,
        binding.host,
        AclOperation(binding.operation_int),
        AclPermissionType(binding.permission_type_int),
    )


def delete(admin: AdminClient, acls: list[AclBinding], timeout: float = 30.0) -> list[str]:
    """Delete exactly these bindings; returns the lines of those deleted. Raises AclApplyError
    naming every failure (and what was deleted before it)."""
    if not acls:
        return []
    filters = {_exactly(b): b for b in acls}
    futures = admin.delete_acls(list(filters), request_timeout=timeout)
    return settle(futures, filters.items(), timeout)
