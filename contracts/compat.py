"""Backward compatibility of tool contract versions: what changed, and which version bump it needs.

The seeds version tool contracts like production APIs (13.12): MAJOR for breaking changes to the
input schema, the output schema or the behavior; MINOR for backward-compatible schema additions;
PATCH for fixes and documentation, with no schema change. `check(old, new)` compares two contract
documents (`{"contract": ..., "binding": ...}`, or the contract section alone) and returns a
`Report`: every finding, `breaking` or `compatible`, and whether `new`'s version number is allowed
for them. It is pure: no files, no registry, no clock.

The rules of the input and output schemas (`input.<change>`, `output.<change>`) are in
`schema_compat.py`, which compares them with the parts of a schema `schema_values.py` reads.

Beyond the schemas: `identity.name_changed` (breaking), `behavior.side_effect_class_riskier`
(breaking) and `behavior.side_effect_class_safer` (compatible) in the order of the reference
schema's enum, `behavior.semantics_changed` (breaking), `security.scope_added` (breaking: callers
granted only the old scopes are refused) and `security.scope_removed` (compatible).

**The verdict**: the new version must be greater than the old; a breaking finding requires a MAJOR
bump, a compatible finding at least a MINOR one; a PATCH bump is right only with no finding at all
(descriptions, runtime limits, the executor binding may change). `check_registry` checks every pair
of consecutive versions of each tool in a registry.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, Literal

from toolgate.contracts.admission import REFERENCE_SCHEMA
from toolgate.contracts.contract import Contract, parse_version
from toolgate.contracts.registry import Registry
from toolgate.contracts.schema_compat import INPUT, OUTPUT, Finding, Severity, schema_findings

Bump = Literal["major", "minor", "patch"]
ActualBump = Literal["major", "minor", "patch", "none", "downgrade"]

RANK = {"downgrade": -1, "none": 0, "patch": 1, "minor": 2, "major": 3}
SIDE_EFFECT_ORDER: tuple[str, ...] = tuple(
    REFERENCE_SCHEMA["properties"]["transactional"]["properties"]["side_effect_class"]["enum"]
)


@dataclass(frozen=True)
class Report:
    """The findings between two versions of one tool and whether the version bump fits them."""

    name: str
    old_version: str
    new_version: str
    findings: tuple[Finding, ...]

    @property
    def breaking(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == "breaking")

    @property
    def compatible(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == "compatible")

    @property
    def required_bump(self) -> Bump:
        if self.breaking:
            return "major"
        return "minor" if self.findings else "patch"

    @property
    def actual_bump(self) -> ActualBump:
        old, new = parse_version(self.old_version), parse_version(self.new_version)
        if new == old:
            return "none"
        if new < old:
            return "downgrade"
        if new[0] > old[0]:
            return "major"
        return "minor" if new[1] > old[1] else "patch"

    @property
    def ok(self) -> bool:
        return RANK[self.actual_bump] >= RANK[self.required_bump]

    @property
    def message(self) -> str:
        head = f"{self.name} {self.old_version} -> {self.new_version}"
        counts = f"{len(self.breaking)} breaking, {len(self.compatible)} compatible finding(s)"
        actual = self.actual_bump
        if actual in ("none", "downgrade"):
            return f"{head}: the new version must be greater than the old ({counts})"
        if self.ok:
            return f"{head}: {actual.upper()} bump, {counts}: ok"
        wanted = _next(parse_version(self.old_version), self.required_bump)
        return f"{head}: {counts} need a {self.required_bump.upper()} bump ({wanted} or later), not a {actual.upper()}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "old_version": self.old_version,
            "new_version": self.new_version,
            "ok": self.ok,
            "required_bump": self.required_bump,
            "actual_bump": self.actual_bump,
            "message": self.message,
            "findings": [f.to_dict() for f in self.findings],
        }


def _next(version: tuple[int, int, int], bump: Bump) -> str:
    major, minor, patch = version
    if bump == "major":
        return f"{major + 1}.0.0"
    if bump == "minor":
        return f"{major}.{minor + 1}.0"
    return f"{major}.{minor}.{patch + 1}"


def _contract(document: Mapping[str, Any]) -> Mapping[str, Any]:
    """The contract section of a document (`{"contract", "binding"}`), or the section itself."""
    section = document.get("contract", document)
    return section if isinstance(section, Mapping) else {}


def findings(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Finding]:
    """Every finding between two contract documents (the rules are in the module docstring)."""
    old_c, new_c = _contract(old), _contract(new)
    found: list[Finding] = []
    for side in (INPUT, OUTPUT):
        key = f"{side}_schema"
        found += schema_findings(side, old_c["affordance"][key], new_c["affordance"][key], key)
    old_name, new_name = old_c["identity"]["name"], new_c["identity"]["name"]
    if old_name != new_name:
        found.append(Finding("breaking", "identity/name", "identity.name_changed", f"{old_name} -> {new_name}"))
    found += _behavior(old_c["transactional"], new_c["transactional"])
    old_scopes, new_scopes = set(old_c["security"]["required_scopes"]), set(new_c["security"]["required_scopes"])
    if added := sorted(new_scopes - old_scopes):
        message = f"new required scope(s) {', '.join(added)}: callers granted only the old scopes are refused"
        found.append(Finding("breaking", "security/required_scopes", "security.scope_added", message))
    if removed := sorted(old_scopes - new_scopes):
        message = f"scope(s) no longer required: {', '.join(removed)}"
        found.append(Finding("compatible", "security/required_scopes", "security.scope_removed", message))
    return found


def _behavior(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Finding]:
    found = []
    before, after = old["side_effect_class"], new["side_effect_class"]
    if before != after:
        riskier = SIDE_EFFECT_ORDER.index(after) > SIDE_EFFECT_ORDER.index(before)
        severity: Severity = "breaking" if riskier else "compatible"
        rule = "behavior.side_effect_class_riskier" if riskier else "behavior.side_effect_class_safer"
        message = f"side-effect class {before} -> {after}"
        found.append(Finding(severity, "transactional/side_effect_class", rule, message))
    if old["semantics"] != new["semantics"]:
        message = f"transactional semantics {old['semantics']} -> {new['semantics']}"
        found.append(Finding("breaking", "transactional/semantics", "behavior.semantics_changed", message))
    return found


def check(old: Mapping[str, Any], new: Mapping[str, Any]) -> Report:
    """The findings between two contract documents and whether `new`'s version fits them."""
    old_c, new_c = _contract(old), _contract(new)
    return Report(
        name=str(old_c["identity"]["name"]),
        old_version=str(old_c["identity"]["version"]),
        new_version=str(new_c["identity"]["version"]),
        findings=tuple(findings(old, new)),
    )


def document(contract: Contract) -> dict[str, Any]:
    """An admitted contract as the document it was loaded from."""
    return {"contract": contract.document, "binding": contract.binding}


def check_registry(registry: Registry) -> list[Report]:
    """`check` on every pair of consecutive versions (by version number) of each tool."""
    return [
        check(document(old), document(new))
        for name in registry.names()
        for old, new in pairwise(registry.versions(name))
    ]
