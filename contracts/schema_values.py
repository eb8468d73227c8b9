"""A JSON Schema's parts as the compatibility check compares them (schema_compat.py): a
subschema without its annotations, the types and values it allows, canonical values, JSON
pointers."""

from __future__ import annotations

import json
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from toolgate.contracts.json_types import json_type

ANNOTATIONS = frozenset({"title", "description", "examples", "$comment", "deprecated", "readOnly", "writeOnly"})
ONE_SCHEMA = frozenset(
    {"items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames"}
    | {"unevaluatedItems", "unevaluatedProperties"}
)
SCHEMA_LIST = frozenset({"anyOf", "oneOf", "allOf", "prefixItems"})
SCHEMA_MAP = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})


def pointer(path: str, *segments: str) -> str:
    escaped = (s.replace("~", "~0").replace("/", "~1") for s in segments)
    return "/".join((path, *escaped))


def as_schema(value: Any) -> Mapping[str, Any]:
    """A subschema as a mapping: `true` or absent is `{}` (anything); `false` is `{"not": {}}`."""
    if value is False:
        return {"not": {}}
    return value if isinstance(value, Mapping) else {}


def strip(value: Any) -> Any:
    """A schema without its annotations (property *names* such as "description" stay)."""
    if not isinstance(value, Mapping):
        return value
    return {key: strip_keyword(key, sub) for key, sub in value.items() if key not in ANNOTATIONS}


def strip_keyword(key: str, value: Any) -> Any:
    if key in ONE_SCHEMA:
        return strip(value)
    if key in SCHEMA_LIST and isinstance(value, list):
        return [strip(v) for v in value]
    if key in SCHEMA_MAP and isinstance(value, Mapping):
        return {name: strip(v) for name, v in value.items()}
    return value


def canon(value: Any) -> str:
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


def allowed_types(schema: Mapping[str, Any]) -> frozenset[str] | None:
    """The JSON types a schema allows (from `type`, else from `const`/`enum`); None for any."""
    declared = schema.get("type")
    if declared is not None:
        return frozenset([declared] if isinstance(declared, str) else declared)
    values = [schema["const"]] if "const" in schema else schema.get("enum")
    return None if values is None else frozenset(json_type(v) for v in values)


def covered(inner: frozenset[str] | None, outer: frozenset[str] | None) -> bool:
    """Does `outer` allow every type `inner` allows ("number" covers "integer")?"""
    if outer is None:
        return True
    if inner is None:
        return False
    return all(t in outer or (t == "integer" and "number" in outer) for t in inner)


def allowed_values(schema: Mapping[str, Any]) -> frozenset[str] | None:
    """The canonical values `const` and `enum` allow, or None when they do not restrict."""
    sets = []
    if "const" in schema:
        sets.append(frozenset({canon(schema["const"])}))
    if "enum" in schema:
        sets.append(frozenset(canon(v) for v in schema["enum"]))
    return frozenset.intersection(*sets) if sets else None


def shown(schema: Mapping[str, Any], key: str) -> str:
    return json.dumps(schema[key]) if key in schema else "absent"


def keyword_value(schema: Mapping[str, Any], key: str) -> str | None:
    """A value keyword's canonical value; None when absent (distinct from JSON null, "null")."""
    return canon(schema[key]) if key in schema else None


def rational(number: Any) -> Fraction:
    return Fraction(str(number))
