"""Backward compatibility of a tool contract's input and output schemas: the changes between
two versions of one side's schema, each a `Finding` (compat.py turns them into a version bump).

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
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from toolgate.contracts.schema_values import (
    ANNOTATIONS,
    allowed_types,
    allowed_values,
    as_schema,
    covered,
    keyword_value,
    pointer,
    rational,
    shown,
    strip,
    strip_keyword,
)

Severity = Literal["breaking", "compatible"]
Direction = Literal["narrows", "widens", "changes"]

INPUT, OUTPUT = "input", "output"

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


def _direction(narrows: bool, widens: bool) -> Direction:
    if narrows and widens:
        return "changes"
    return "narrows" if narrows else "widens"


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
        if strip(old) == strip(new):
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
            self.compare(as_schema(old_items), as_schema(new_items), pointer(path, "items"))
        elif strip_keyword("items", old_items) != strip_keyword("items", new_items):
            self.report("breaking", pointer(path, "items"), "unanalyzed_change", "items changed; not analyzed")
        for defs in ("$defs", "definitions"):
            old_defs, new_defs = old.get(defs, {}), new.get(defs, {})
            for name in sorted(set(old_defs) & set(new_defs)):
                self.compare(as_schema(old_defs[name]), as_schema(new_defs[name]), pointer(path, defs, name))
        for key in sorted((set(old) | set(new)) - ANALYZED - ANNOTATIONS):
            if strip_keyword(key, old.get(key)) != strip_keyword(key, new.get(key)):
                message = f"{key} changed; not analyzed here, so assumed breaking"
                self.report("breaking", pointer(path, key), "unanalyzed_change", message)

    def type(self, old: Mapping[str, Any], new: Mapping[str, Any], path: str) -> None:
        if old.get("type") == new.get("type"):
            return
        old_types, new_types = allowed_types(old), allowed_types(new)
        narrows, widens = not covered(old_types, new_types), not covered(new_types, old_types)
        if not narrows and not widens:
            return  # the same types written another way
        direction = _direction(narrows, widens)
        change = {"narrows": "type_narrowed", "widens": "type_widened", "changes": "type_changed"}[direction]
        self.add(pointer(path, "type"), change, direction, f"type {shown(old, 'type')} -> {shown(new, 'type')}")

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
            self.add(pointer(path, key), change, direction, f"{key} {shown(old, key)} -> {shown(new, key)}")
        before, after = old.get("multipleOf"), new.get("multipleOf")
        if before != after:
            # multiples of `after` include all multiples of `before` exactly when `after` divides `before`
            narrows = after is not None and (before is None or rational(before) % rational(after) != 0)
            widens = before is not None and (after is None or rational(after) % rational(before) != 0)
            direction = _direction(narrows, widens)
            change = {"narrows": "multiple_of_tightened", "widens": "multiple_of_relaxed"}.get(
                direction, "multiple_of_changed"
            )
            message = f"multipleOf {shown(old, 'multipleOf')} -> {shown(new, 'multipleOf')}"
            self.add(pointer(path, "multipleOf"), change, direction, message)
        if bool(old.get("uniqueItems")) != bool(new.get("uniqueItems")):
            added = bool(new.get("uniqueItems"))
            change, direction = ("unique_items_added", "narrows") if added else ("unique_items_removed", "widens")
            self.add(pointer(path, "uniqueItems"), change, direction, f"uniqueItems is now {str(added).lower()}")

    def values(self, old: Mapping[str, Any], new: Mapping[str, Any], path: str) -> None:
        const_changed = keyword_value(old, "const") != keyword_value(new, "const")
        if not const_changed and keyword_value(old, "enum") == keyword_value(new, "enum"):
            return
        before, after = allowed_values(old), allowed_values(new)
        narrows = after is not None and (before is None or not before <= after)
        widens = before is not None and (after is None or not after <= before)
        if not narrows and not widens:
            return  # the same values written another way
        key = "const" if const_changed else "enum"
        message = f"{key} {shown(old, key)} -> {shown(new, key)}"
        direction = _direction(narrows, widens)
        if key == "const":
            change = {"narrows": "const_added", "widens": "const_removed", "changes": "const_changed"}[direction]
        else:
            change = {"narrows": "enum_narrowed", "widens": "enum_widened", "changes": "enum_changed"}[direction]
        self.add(pointer(path, key), change, direction, message)

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
        self.add(pointer(path, key), change, direction, f"{key} {shown(old, key)} -> {shown(new, key)}")

    def object(self, old: Mapping[str, Any], new: Mapping[str, Any], path: str) -> None:
        old_props, new_props = old.get("properties", {}), new.get("properties", {})
        old_required, new_required = set(old.get("required", [])), set(new.get("required", []))
        for name in old_props:
            where = pointer(path, "properties", name)
            if name not in new_props:
                self.report("breaking", where, "property_removed", f"{name} was removed")
                continue
            old_prop, new_prop = as_schema(old_props[name]), as_schema(new_props[name])
            if self.side == INPUT and name not in old_required:
                self.default(old_prop, new_prop, where)
            self.compare(old_prop, new_prop, where)
        for name in new_props:
            if name not in old_props:
                kind = "required" if name in new_required else "optional"
                self.report("compatible", pointer(path, "properties", name), "property_added", f"new {kind} {name}")
        for name in sorted(new_required - old_required):
            self.add(pointer(path, "properties", name), "required_added", "narrows", f"{name} is now required")
        for name in sorted(old_required - new_required):
            if name in old_props and name not in new_props:
                continue  # reported as removed
            self.add(pointer(path, "properties", name), "required_removed", "widens", f"{name} may now be missing")
        self.additional(old, new, path)

    def default(self, old: Mapping[str, Any], new: Mapping[str, Any], path: str) -> None:
        """An optional input property's default is what callers who omit it send."""
        if keyword_value(old, "default") != keyword_value(new, "default"):
            message = f"default {shown(old, 'default')} -> {shown(new, 'default')}: omitting it now means another value"
            self.report("breaking", pointer(path, "default"), "default_changed", message)

    def additional(self, old: Mapping[str, Any], new: Mapping[str, Any], path: str) -> None:
        before, after = old.get("additionalProperties", True), new.get("additionalProperties", True)
        where = pointer(path, "additionalProperties")
        if (before is False) == (after is False):
            if before is not False:
                self.compare(as_schema(before), as_schema(after), where)
            return
        closed = after is False
        change = "additional_properties_closed" if closed else "additional_properties_opened"
        direction: Direction = "narrows" if closed else "widens"
        message = f"additionalProperties {shown(old, 'additionalProperties')} -> {shown(new, 'additionalProperties')}"
        if self.side == OUTPUT:  # callers ignore the fields they do not know
            self.report("compatible", where, change, message)
        else:
            self.add(where, change, direction, message)


def schema_findings(side: str, old: Any, new: Any, path: str) -> list[Finding]:
    """Every change between two versions of one side's schema (`INPUT` or `OUTPUT`), at `path`."""
    walk = _Walk(side)
    walk.compare(as_schema(old), as_schema(new), path)
    return walk.findings
