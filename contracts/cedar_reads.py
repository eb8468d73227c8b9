"""What of a call's context a Cedar policy set reads, and the context cut to it. Pure.

Building Cedar's context from a request is most of what Cedar costs per call
(docs/cedar-plan.md), and an attribute no policy reads cannot change a decision. So a set's
conditions (Cedar's JSON form of them) are walked once when it is admitted, for every
`context.a.b` and `context.a has b`, and each request carries only those paths. A policy
that uses the context whole (`context == {...}`) makes every request carry all of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

CONTEXT = {"Var": "context"}

# An attribute -> what of it is read: the attributes under it, or None for all of it.
Paths = dict[str, "Paths | None"]


def context_reads(node: Any) -> Paths | None:
    """The context paths `node` reads, or None when it reads the context whole."""
    paths: Paths = {}
    return paths if _walk(node, paths) else None


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
