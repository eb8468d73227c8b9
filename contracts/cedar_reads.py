"""What of a call's context a Cedar policy set reads, per action, and the context cut to it. Pure.

Building Cedar's context from a request is most of what Cedar costs per call
(docs/cedar-plan.md), and an attribute no policy reads cannot change a decision. So a set's
policies (Cedar's JSON form of them) are walked once when it is admitted, for every
`context.a.b` and `context.a has b` in their conditions, and a request for an action carries
only the paths the policies whose scope admits that action read (Cedar tests a policy's scope
before its conditions, so another action's policy never reads this one's context). A policy
that uses the context whole (`context == {...}`) makes its actions' requests carry all of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

CONTEXT = {"Var": "context"}
PRINCIPAL = {"Var": "principal"}
RESOURCE = {"Var": "resource"}
RESOURCE_TENANT = {".": {"left": RESOURCE, "attr": "tenant"}}

# An attribute -> what of it is read: the attributes under it, or None for all of it.
Paths = dict[str, "Paths | None"]


def context_reads(node: Any) -> Paths | None:
    """The context paths `node` reads, or None when it reads the context whole."""
    paths: Paths = {}
    return paths if _walk(node, paths) else None


def applying(policies: list[Mapping[str, Any]], actions: Mapping[str, Any]) -> dict[str, list[Mapping[str, Any]]]:
    """For each action of the schema's `actions` that has a context (a tool version), the
    `policies` (Cedar's JSON form) whose action scope may admit it."""
    groups: dict[str, set[str]] = {}
    for name, action in actions.items():
        for group in action.get("memberOf", []):
            groups.setdefault(group["id"], set()).add(name)
    scopes = [_scope(policy.get("action", {}), groups) for policy in policies]
    return {
        name: [p for p, scope in zip(policies, scopes, strict=True) if _in(name, scope)]
        for name, action in actions.items()
        if "appliesTo" in action
    }


def reads_by_action(policies: list[Mapping[str, Any]], actions: Mapping[str, Any]) -> dict[str, Paths | None]:
    """For each tool version of the schema's `actions`, the context paths the `policies` that
    may apply to it read."""
    return {
        name: context_reads([p.get("conditions", []) for p in found])
        for name, found in applying(policies, actions).items()
    }


def resource_read(policy: Mapping[str, Any]) -> bool:
    """Whether a policy sees more of the call's resource than its tenant (`resource.tenant`): a
    resource scope, `resource is T`, one of its attributes. A request for an action none of whose
    policies does is made with the call's Tenant as its resource (a Tenant's `tenant` is itself:
    every decision is the same), sparing the round an entity per call."""
    scope = policy.get("resource", {})
    return scope.get("op", "All") != "All" or _uses_resource(policy.get("conditions", []))


def _uses_resource(node: Any) -> bool:
    if node == RESOURCE:
        return True
    if isinstance(node, list):
        return any(_uses_resource(child) for child in node)
    if not isinstance(node, Mapping) or node == RESOURCE_TENANT:
        return False
    has = node.get("has")
    if isinstance(has, Mapping) and has.get("left") == RESOURCE and has.get("attr") == "tenant":
        return False
    return any(_uses_resource(child) for child in node.values())


def principal_in_resource(node: Any) -> bool:
    """Whether `node` (a policy's conditions) tests `principal in resource`: never true of a
    resource that is not a Tenant (an agent is in its tenant, not in an invoice)."""
    if isinstance(node, list):
        return any(principal_in_resource(child) for child in node)
    if not isinstance(node, Mapping):
        return False
    test = node.get("in")
    if isinstance(test, Mapping) and test.get("left") == PRINCIPAL and test.get("right") == RESOURCE:
        return True
    return any(principal_in_resource(child) for child in node.values())


def _in(action: str, scope: set[str] | None) -> bool:
    return scope is None or action in scope


def _scope(scope: Mapping[str, Any], groups: Mapping[str, set[str]]) -> set[str] | None:
    """The actions a policy's action scope admits; None for all (or a scope not understood:
    then its reads count for every action, which is safe)."""
    named = [scope["entity"]] if "entity" in scope else scope.get("entities", [])
    ids = {str(e.get("id")) for e in named}
    if scope.get("op") == "==":
        return ids
    if scope.get("op") == "in":
        return ids | {member for i in ids for member in groups.get(i, ())}
    return None


def principal_reads(policies: list[Mapping[str, Any]]) -> frozenset[str] | None:
    """The attributes of the principal (an Agent) the policies read: a round's entities carry
    only those (building entities is Cedar's other large cost per call). None: keep them all,
    when some attribute is read of an expression that is neither a variable nor a path from one
    other than the principal (`principal.user.x`, an `if`), so which entity it is cannot be told
    here. (`resource.tenant.domains` reads a Tenant's.)"""
    found: set[str] = set()
    pending: list[Any] = [p.get("conditions", []) for p in policies]
    while pending:
        node = pending.pop()
        if isinstance(node, list):
            pending += node
            continue
        if not isinstance(node, Mapping):
            continue
        for key in (".", "has"):
            access = node.get(key)
            if isinstance(access, Mapping) and "attr" in access:
                left = access.get("left")
                if left == PRINCIPAL:
                    found.add(str(access["attr"]))
                elif _root(left) in (None, "principal"):
                    return None
        pending += list(node.values())
    return frozenset(found)


def _root(node: Any) -> str | None:
    """The variable a chain of attribute accesses starts from (`resource.tenant` -> "resource"),
    or None when it starts from anything else."""
    while isinstance(node, Mapping) and set(node) == {"."} and isinstance(node["."], Mapping):
        node = node["."].get("left")
    return str(node["Var"]) if isinstance(node, Mapping) and set(node) == {"Var"} else None


def reads(paths: Paths | None, name: str) -> bool:
    """Whether a request cut to `paths` carries `context.<name>` (None: it carries all)."""
    return paths is None or name in paths


def agents_alike(policies: list[Mapping[str, Any]]) -> bool:
    """Whether the policies tell the agents of one tenant apart: False when they can. They
    cannot when a principal's scope is any agent or one `in`/`is` a Tenant, and a condition
    uses the principal only as `principal in resource`, `principal in resource.tenant`,
    `principal in Tenant::"t"` or `principal is T`: then an agent's only trait they see is its
    tenant, and one principal per tenant decides for all its agents (a round's distinct agents
    make one request where their calls agree, and its entity set is one agent per tenant)."""
    for policy in policies:
        scope = policy.get("principal", {})
        if scope.get("op") not in ("All", "is", "in") or "slot" in scope or not _tenant(scope.get("entity")):
            return False
        if scope.get("op") == "is" and "in" in scope and not _tenant(scope["in"].get("entity")):
            return False
        if not _principal_by_tenant(policy.get("conditions", [])):
            return False
    return True


def _tenant(entity: Any) -> bool:
    return entity is None or (isinstance(entity, Mapping) and entity.get("type") == "Tenant")


def _principal_by_tenant(node: Any) -> bool:
    """Whether `node` uses the principal only as `principal in resource|Tenant::"t"` or `is`."""
    if node == PRINCIPAL:
        return False
    if isinstance(node, list):
        return all(_principal_by_tenant(child) for child in node)
    if not isinstance(node, Mapping):
        return True
    for key in ("in", "is"):
        test = node.get(key)
        if isinstance(test, Mapping) and test.get("left") == PRINCIPAL:
            if key == "is":
                return "in" not in test or _tenant_side(test["in"])
            return _tenant_side(test.get("right"))
    return all(_principal_by_tenant(child) for child in node.values())


def _tenant_side(node: Any) -> bool:
    if node in (RESOURCE, RESOURCE_TENANT):
        return True
    value = node.get("Value") if isinstance(node, Mapping) else None
    return isinstance(value, Mapping) and _tenant(value.get("__entity"))


def prune(value: Any, paths: Paths | None) -> Any:
    """`value` cut to `paths` (None: all of it)."""
    if paths is None or not isinstance(value, Mapping):
        return value
    return {name: prune(value[name], sub) for name, sub in paths.items() if name in value}


def _path(node: Any) -> list[str] | None:
    """`context.a.b` as ["a", "b"], `context` as []; None for anything else."""
    if node == CONTEXT:
        return []
    if isinstance(node, Mapping) and set(node) == {"."}:
        inner = _path(node["."].get("left"))
        return None if inner is None else [*inner, str(node["."]["attr"])]
    return None


def _walk(node: Any, paths: Paths) -> bool:
    """Record every context path under `node`; False when the context is used whole."""
    if node == CONTEXT:
        return False
    if isinstance(node, list):
        return all(_walk(child, paths) for child in node)
    if not isinstance(node, Mapping):
        return True
    for key in (".", "has"):
        access = node.get(key)
        if isinstance(access, Mapping) and "attr" in access:
            path = _path(access.get("left"))
            if path is not None:
                _insert(paths, [*path, str(access["attr"])])
                return True
    return all(_walk(child, paths) for child in node.values())


def _insert(paths: Paths, path: list[str]) -> None:
    *parents, last = path
    node = paths
    for name in parents:
        child = node.setdefault(name, {})
        if child is None:  # all of it is read already
            return
        node = child
    node[last] = None
