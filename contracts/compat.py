"""Backward compatibility of tool contract versions: what changed, and which version bump it needs.

The seeds version tool contracts like production APIs (13.12): MAJOR for breaking changes to the
input schema, the output schema or the behavior; MINOR for backward-compatible schema additions;
PATCH for fixes and documentation, with no schema change. `check(old, new)` compares two contract
documents (`{"contract": ..., "binding": ...}`, or the contract section alone) and returns a
`Report`: every finding, `breaking` or `compatible`, and whether `new`'s version number is allowed
for them. It is pure: no files, no registry, no clock.

**The rule of each side.** Input schema (what callers send): every argument object the old schema
accepted must still be accepted, so a change that *narrows* what is valid is breaking and one that
*widens* it is compatible. Output schema (what callers read): whatever the new version returns must
still satisfy what callers were promised, so it is the reverse, a narrowing is compatible and a
widening is breaking, except that new output properties are compatible (callers ignore fields they
do not know) and `additionalProperties` is therefore never breaking on the output side. A change
that is neither a narrowing nor a widening (string -> integer, one pattern for another) is breaking
on both sides.

Rules (`<side>.<change>`, side `input` or `output`), each reported at the JSON pointer of what
changed, e.g. `input_schema/properties/lines/items/properties/quantity/maximum`:

  required_added / required_removed        a property became required / optional
  property_added / property_removed        a property appeared / disappeared (a rename is both)
  type_narrowed / type_widened / type_changed
                                           "number" covers "integer"; no `type` means any type
  bound_tightened / bound_relaxed          maxLength, maxItems, maxProperties, maximum, exclusiveMaximum,
                                           minLength, minItems, minProperties, minimum, exclusiveMinimum
  multiple_of_tightened / multiple_of_relaxed
  unique_items_added / unique_items_removed
  pattern_added / pattern_removed / pattern_changed
  format_added / format_removed / format_changed   (the validation stage checks formats)
  enum_narrowed / enum_widened / enum_changed      the values `enum` and `const` together allow
  const_added / const_removed / const_changed
  additional_properties_closed / additional_properties_opened
  default_changed                          (input) an optional property's `default` was added, changed or
                                           removed: callers who omit it now get another value
  unanalyzed_change                        a keyword not reasoned about here changed (anyOf, oneOf, allOf,
                                           not, $ref, if/then/else, patternProperties, prefixItems, ...):
                                           assumed breaking

Walked recursively through `properties`, `items`, `additionalProperties` schemas and `$defs`
(`definitions`). Annotations (title, description, examples, $comment, deprecated, readOnly,
writeOnly) are never compared. Each keyword is compared on its own: a conservative approximation
that may call a change breaking when a combination of keywords keeps it compatible, never the
reverse for the keywords it analyzes.

One deliberate difference from the seeds' formal check (13.12.2), which lets a new *required* input
field with a `default` pass: toolgate's validation stage checks the input schema *before* it fills
in defaults, so a caller that omits such a field is refused. `required_added` is breaking with or
without a default; add the field as optional with a default instead (compatible).

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

import json
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from itertools import pairwise
from typing import Any, Literal

from toolgate.contracts.json_types import json_type
from toolgate.contracts.registry import REFERENCE_SCHEMA, Contract, Registry, parse_version

Severity = Literal["breaking", "compatible"]
Bump = Literal["major", "minor", "patch"]
ActualBump = Literal["major", "minor", "patch", "none", "downgrade"]
Direction = Literal["narrows", "widens", "changes"]

INPUT, OUTPUT = "input", "output"
RANK = {"downgrade": -1, "none": 0, "patch": 1, "minor": 2, "major": 3}
SIDE_EFFECT_ORDER: tuple[str, ...] = tuple(
    REFERENCE_SCHEMA["properties"]["transactional"]["properties"]["side_effect_class"]["enum"]
)

ANNOTATIONS = frozenset({"title", "description", "examples", "$comment", "deprecated", "readOnly", "writeOnly"})
ONE_SCHEMA = frozenset(
    {"items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames"}
    | {"unevaluatedItems", "unevaluatedProperties"}
)
SCHEMA_LIST = frozenset({"anyOf", "oneOf", "allOf", "prefixItems"})
SCHEMA_MAP = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
UPPER_BOUNDS = ("maxLength", "maxItems", "maxProperties", "maximum", "exclusiveMaximum")
LOWER_BOUNDS = ("minLength", "minItems", "minProperties", "minimum", "exclusiveMinimum")
COUNT_BOUNDS = frozenset({"minLength", "minItems", "minProperties"})  # absent means 0
# Keywords compared below; any other keyword that changed is an unanalyzed change.
ANALYZED = frozenset(
    {"type", "enum", "const", "multipleOf", "uniqueItems", "pattern", "format", "properties", "required"}
    | {"additionalProperties", "items", "$defs", "definitions", "default", "$schema", "$id"}
    | set(UPPER_BOUNDS)
    | set(LOWER_BOUNDS)
)


@dataclass(frozen=True)
class Finding:
    """One change between two versions: how bad, where (a JSON pointer), which rule, and why."""

    severity: Severity
    path: str
    rule: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"severity": self.severity, "path": self.path, "rule": self.rule, "message": self.message}


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


# --- schema values -------------------------------------------------------------------------


def _pointer(path: str, *segments: str) -> str:
    escaped = (s.replace("~", "~0").replace("/", "~1") for s in segments)
    return "/".join((path, *escaped))


def _schema(value: Any) -> Mapping[str, Any]:
    """A subschema as a mapping: `true` or absent is `{}` (anything); `false` is `{"not": {}}`."""
    if value is False:
        return {"not": {}}
    return value if isinstance(value, Mapping) else {}


def _strip(value: Any) -> Any:
    """A schema without its annotations (property *names* such as "description" stay)."""
    if not isinstance(value, Mapping):
        return value
    return {key: _strip_keyword(key, sub) for key, sub in value.items() if key not in ANNOTATIONS}


def _strip_keyword(key: str, value: Any) -> Any:
    if key in ONE_SCHEMA:
        return _strip(value)
    if key in SCHEMA_LIST and isinstance(value, list):
        return [_strip(v) for v in value]
    if key in SCHEMA_MAP and isinstance(value, Mapping):
        return {name: _strip(v) for name, v in value.items()}
    return value


def _canon(value: Any) -> str:
    """A JSON value's identity as JSON Schema sees it (1 == 1.0, true != 1)."""

    def norm(v: Any) -> Any:
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, Mapping):
            return {k: norm(x) for k, x in v.items()}
        if isinstance(v, list):
            return [norm(x) for x in v]
        return v

    return json.dumps(norm(value), sort_keys=True, separators=(",", ":"))


def _types(schema: Mapping[str, Any]) -> frozenset[str] | None:
    """The JSON types a schema allows (from `type`, else from `const`/`enum`); None for any."""
    declared = schema.get("type")
    if declared is not None:
        return frozenset([declared] if isinstance(declared, str) else declared)
    values = [schema["const"]] if "const" in schema else schema.get("enum")
    return None if values is None else frozenset(json_type(v) for v in values)


def _covered(inner: frozenset[str] | None, outer: frozenset[str] | None) -> bool:
    """Does `outer` allow every type `inner` allows ("number" covers "integer")?"""
    if outer is None:
        return True
    if inner is None:
        return False
    return all(t in outer or (t == "integer" and "number" in outer) for t in inner)


def _values(schema: Mapping[str, Any]) -> frozenset[str] | None:
    """The canonical values `const` and `enum` allow, or None when they do not restrict."""
    sets = []
    if "const" in schema:
        sets.append(frozenset({_canon(schema["const"])}))
    if "enum" in schema:
        sets.append(frozenset(_canon(v) for v in schema["enum"]))
    return frozenset.intersection(*sets) if sets else None


def _direction(narrows: bool, widens: bool) -> Direction:
    if narrows and widens:
        return "changes"
    return "narrows" if narrows else "widens"


def _show(schema: Mapping[str, Any], key: str) -> str:
    return json.dumps(schema[key]) if key in schema else "absent"


# --- schema comparison ---------------------------------------------------------------------


class _Walk:
    """Compares one side's schemas (input or output), collecting findings."""

    def __init__(self, side: str) -> None:
        self.side = side
        self.findings: list[Finding] = []

    def add(self, path: str, change: str, direction: Direction, message: str) -> None:
        """A change that narrows, widens or otherwise changes the set of valid values."""
        breaking = direction == "changes" or (direction == "narrows") == (self.side == INPUT)
        self.report("breaking" if breaking else "compatible", path, change, message)

    def report(self, severity: Severity, path: str, change: str, message: str) -> None:
        self.findings.append(Finding(severity, path, f"{self.side}.{change}", message))

    def compare(self, old: Mapping[str, Any], new: Mapping[str, Any], path: str) -> None:
        if _strip(old) == _strip(new):
            return
        self.type(old, new, path)
        self.bounds(old, new, path)
        self.values(old, new, path)
        for key in ("pattern", "format"):
            self.exact(old, new, path, key)
        if any(k in s for s in (old, new) for k in ("properties", "required", "additionalProperties")):
            self.object(old, new, path)
        old_items, new_items = old.get("items", True), new.get("items", True)
        if isinstance(old_items, Mapping | bool) and isinstance(new_items, Mapping | bool):
            self.compare(_schema(old_items), _schema(new_items), _pointer(path, "items"))
        elif _strip_keyword("items", old_items) != _strip_keyword("items", new_items):
            self.report("breaking", _pointer(path, "items"), "unanalyzed_change", "items changed; not analyzed")
        for defs in ("$defs", "definitions"):
            old_defs, new_defs = old.get(defs, {}), new.get(defs, {})
            for name in sorted(set(old_defs) & set(new_defs)):
                self.compare(_schema(old_defs[name]), _schema(new_defs[name]), _pointer(path, defs, name))
        for key in sorted((set(old) | set(new)) - ANALYZED - ANNOTATIONS):
            if _strip_keyword(key, old.get(key)) != _strip_keyword(key, new.get(key)):
                message = f"{key} changed; not analyzed here, so assumed breaking"
                self.report("breaking", _pointer(path, key), "unanalyzed_change", message)

    def type(self, old: Mapping[str, Any], new: Mapping[str, Any], path: str) -> None:
        if old.get("type") == new.get("type"):
            return
        old_types, new_types = _types(old), _types(new)
        narrows, widens = not _covered(old_types, new_types), not _covered(new_types, old_types)
        if not narrows and not widens:
            return  # the same types written another way
        direction = _direction(narrows, widens)
        change = {"narrows": "type_narrowed", "widens": "type_widened", "changes": "type_changed"}[direction]
        self.add(_pointer(path, "type"), change, direction, f"type {_show(old, 'type')} -> {_show(new, 'type')}")

    def bounds(self, old: Mapping[str, Any], new: Mapping[str, Any], path: str) -> None:
        direction: Direction
        for key in (*UPPER_BOUNDS, *LOWER_BOUNDS):
            if old.get(key) == new.get(key):
                continue
            neutral = 0 if key in COUNT_BOUNDS else None
            before, after = old.get(key, neutral), new.get(key, neutral)
            if before == after:
                continue
            upper = key in UPPER_BOUNDS
            tighter = after is not None and (before is None or (after < before if upper else after > before))
            change, direction = ("bound_tightened", "narrows") if tighter else ("bound_relaxed", "widens")
            self.add(_pointer(path, key), change, direction, f"{key} {_show(old, key)} -> {_show(new, key)}")
        before, after = old.get("multipleOf"), new.get("multipleOf")
        if before != after:
            # multiples of `after` include all multiples of `before` exactly when `after` divides `before`
            narrows = after is not None and (before is None or _rational(before) % _rational(after) != 0)
            widens = before is not None and (after is None or _rational(after) % _rational(before) != 0)
            direction = _direction(narrows, widens)
            change = {"narrows": "multiple_of_tightened", "widens": "multiple_of_relaxed"}.get(
                direction, "multiple_of_changed"
            )
            message = f"multipleOf {_show(old, 'multipleOf')} -> {_show(new, 'multipleOf')}"
            self.add(_pointer(path, "multipleOf"), change, direction, message)
        if bool(old.get("uniqueItems")) != bool(new.get("uniqueItems")):
            added = bool(new.get("uniqueItems"))
            change, direction = ("unique_items_added", "narrows") if added else ("unique_items_removed", "widens")
            self.add(_pointer(path, "uniqueItems"), change, direction, f"uniqueItems is now {str(added).lower()}")

    def values(self, old: Mapping[str, Any], new: Mapping[str, Any], path: str) -> None:
        const_changed = _keyword(old, "const") != _keyword(new, "const")
        if not const_changed and _keyword(old, "enum") == _keyword(new, "enum"):
            return
        before, after = _values(old), _values(new)
        narrows = after is not None and (before is None or not before <= after)
        widens = before is not None and (after is None or not after <= before)
        if not narrows and not widens:
            return  # the same values written another way
        key = "const" if const_changed else "enum"
        message = f"{key} {_show(old, key)} -> {_show(new, key)}"
        direction = _direction(narrows, widens)
        if key == "const":
            change = {"narrows": "const_added", "widens": "const_removed", "changes": "const_changed"}[direction]
        else:
            change = {"narrows": "enum_narrowed", "widens": "enum_widened", "changes": "enum_changed"}[direction]
        self.add(_pointer(path, key), change, direction, message)

    def exact(self, old: Mapping[str, Any], new: Mapping[str, Any], path: str, key: str) -> None:
        """`pattern` and `format`: only added (narrows) or removed (widens) is comparable."""
        if old.get(key) == new.get(key):
            return
        direction: Direction
        if key not in old:
            change, direction = f"{key}_added", "narrows"
        elif key not in new:
            change, direction = f"{key}_removed", "widens"
        else:
            change, direction = f"{key}_changed", "changes"
        self.add(_pointer(path, key), change, direction, f"{key} {_show(old, key)} -> {_show(new, key)}")

    def object(self, old: Mapping[str, Any], new: Mapping[str, Any], path: str) -> None:
        old_props, new_props = old.get("properties", {}), new.get("properties", {})
        old_required, new_required = set(old.get("required", [])), set(new.get("required", []))
        for name in old_props:
            where = _pointer(path, "properties", name)
            if name not in new_props:
                self.report("breaking", where, "property_removed", f"{name} was removed")
                continue
            old_prop, new_prop = _schema(old_props[name]), _schema(new_props[name])
            if self.side == INPUT and name not in old_required:
                self.default(old_prop, new_prop, where)
            self.compare(old_prop, new_prop, where)
        for name in new_props:
            if name not in old_props:
                kind = "required" if name in new_required else "optional"
                self.report("compatible", _pointer(path, "properties", name), "property_added", f"new {kind} {name}")
        for name in sorted(new_required - old_required):
            self.add(_pointer(path, "properties", name), "required_added", "narrows", f"{name} is now required")
        for name in sorted(old_required - new_required):
            if name in old_props and name not in new_props:
                continue  # reported as removed
            self.add(_pointer(path, "properties", name), "required_removed", "widens", f"{name} may now be missing")
        self.additional(old, new, path)

    def default(self, old: Mapping[str, Any], new: Mapping[str, Any], path: str) -> None:
        """An optional input property's default is what callers who omit it send."""
        if _keyword(old, "default") != _keyword(new, "default"):
            message = f"default {_show(old, 'default')} -> {_show(new, 'default')}: omitting it now means another value"
            self.report("breaking", _pointer(path, "default"), "default_changed", message)

    def additional(self, old: Mapping[str, Any], new: Mapping[str, Any], path: str) -> None:
        before, after = old.get("additionalProperties", True), new.get("additionalProperties", True)
        where = _pointer(path, "additionalProperties")
        if (before is False) == (after is False):
            if before is not False:
                self.compare(_schema(before), _schema(after), where)
            return
        closed = after is False
        change = "additional_properties_closed" if closed else "additional_properties_opened"
        direction: Direction = "narrows" if closed else "widens"
        message = f"additionalProperties {_show(old, 'additionalProperties')} -> {_show(new, 'additionalProperties')}"
        if self.side == OUTPUT:  # callers ignore the fields they do not know
            self.report("compatible", where, change, message)
        else:
            self.add(where, change, direction, message)


def _keyword(schema: Mapping[str, Any], key: str) -> str | None:
    """A value keyword's canonical value; None when absent (distinct from JSON null, "null")."""
    return _canon(schema[key]) if key in schema else None


def _rational(number: Any) -> Fraction:
    return Fraction(str(number))


# --- contracts -----------------------------------------------------------------------------


def _contract(document: Mapping[str, Any]) -> Mapping[str, Any]:
    """The contract section of a document (`{"contract", "binding"}`), or the section itself."""
    section = document.get("contract", document)
    return section if isinstance(section, Mapping) else {}


def findings(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Finding]:
    """Every finding between two contract documents (the rules are in the module docstring)."""
    old_c, new_c = _contract(old), _contract(new)
    found: list[Finding] = []
    for side in (INPUT, OUTPUT):
        walk = _Walk(side)
        key = f"{side}_schema"
        walk.compare(_schema(old_c["affordance"][key]), _schema(new_c["affordance"][key]), key)
        found += walk.findings
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
