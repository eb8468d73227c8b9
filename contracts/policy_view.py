"""A policy set as an operator reads it, and what differs between two (issue 51, part 3). Pure.

`view` lists an admitted set (contracts/policy_set.py): its digest, each policy by @id with its
effect, approvals, groups, message and source file, and its budgets. `diff` compares two views:
the policies added, removed and changed by @id (a policy changed when its Cedar form changed: its
scope, conditions or annotations; not its layout or comments), the budgets changed (every value
that differs, by path), and both digests. `toolgate policy show|diff` print them (cli/policy.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import cedarpy

from toolgate.contracts.policy_set import PolicySet


@dataclass(frozen=True)
class Shown:
    """One policy of a set, as `toolgate policy show` lists it."""

    id: str
    effect: str
    source: str
    approvals: int = 0
    groups: tuple[str, ...] = ()
    message: str = ""
    body: str = ""  # Cedar's JSON form of the policy (canonical): what `diff` compares


@dataclass(frozen=True)
class SetView:
    digest: str
    policies: tuple[Shown, ...]
    budgets: Mapping[str, Any]

    def as_json(self) -> dict[str, Any]:
        policies = [{k: v for k, v in asdict(p).items() if k != "body"} for p in self.policies]
        return {"digest": self.digest, "policies": policies, "budgets": dict(self.budgets)}


def bodies(files: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Each policy's Cedar JSON form (canonical text), by its @id, from the set's files."""
    found: dict[str, str] = {}
    for _, text in files:
        for body in json.loads(cedarpy.policies_to_json_str(text)).get("staticPolicies", {}).values():
            name = (body.get("annotations") or {}).get("id", "")
            found[name] = json.dumps(body, sort_keys=True)
    return found


def view(policy_set: PolicySet, files: Iterable[tuple[str, str]]) -> SetView:
    """The set admitted from `files` ((source, text) of its *.cedar files), as an operator reads it."""
    texts = bodies(files)
    policies = tuple(
        Shown(r.id, r.effect, r.source, r.approvals, r.groups, r.message, texts.get(r.id, ""))
        for r in policy_set.cedar.rules.values()
    )
    return SetView(policy_set.digest, policies, policy_set.budgets.document)


@dataclass(frozen=True)
class SetDiff:
    before: str  # the first set's digest
    after: str
    added: tuple[str, ...]  # @ids
    removed: tuple[str, ...]
    changed: tuple[tuple[str, tuple[str, ...]], ...]  # @id, what of it changed
    budgets: tuple[str, ...]  # "path: before -> after"

    @property
    def same(self) -> bool:
        return self.before == self.after or not (self.added or self.removed or self.changed or self.budgets)

    def as_json(self) -> dict[str, Any]:
        return {
            "before": self.before,
            "after": self.after,
            "same": self.same,
            "added": list(self.added),
            "removed": list(self.removed),
            "changed": {name: list(what) for name, what in self.changed},
            "budgets": list(self.budgets),
        }


def _what_changed(a: Shown, b: Shown) -> tuple[str, ...]:
    """What of a policy changed: its annotations, its file (by name: the digest ignores folders), its text."""
    fields = ("effect", "approvals", "groups", "message")
    what = [f"{f}: {getattr(a, f)!r} -> {getattr(b, f)!r}" for f in fields if getattr(a, f) != getattr(b, f)]
    if Path(a.source).name != Path(b.source).name:
        what.append(f"file: {Path(a.source).name} -> {Path(b.source).name}")
    if a.body != b.body:
        what.append("text")
    return tuple(what)


def flat(value: Any, path: str = "") -> dict[str, Any]:
    """A JSON document's leaves by dotted path."""
    if isinstance(value, Mapping) and value:
        found: dict[str, Any] = {}
        for key, sub in value.items():
            found.update(flat(sub, f"{path}.{key}" if path else str(key)))
        return found
    return {path: value}


def diff(a: SetView, b: SetView) -> SetDiff:
    """What differs from set `a` to set `b`."""
    before = {p.id: p for p in a.policies}
    after = {p.id: p for p in b.policies}
    changed = tuple(
        (name, what) for name in before if name in after and (what := _what_changed(before[name], after[name]))
    )
    old, new = flat(a.budgets), flat(b.budgets)
    budgets = tuple(
        f"{path}: {json.dumps(old.get(path))} -> {json.dumps(new.get(path))}"
        for path in sorted(old.keys() | new.keys())
        if old.get(path) != new.get(path)
    )
    return SetDiff(
        a.digest,
        b.digest,
        tuple(n for n in after if n not in before),
        tuple(n for n in before if n not in after),
        changed,
        budgets,
    )
