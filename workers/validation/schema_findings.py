"""jsonschema's errors as the seeds' taxonomy: each finding a taxonomy class with a field error
that says where, what was expected and what came. Pure.

    jsonschema keyword                      taxonomy class        code
    required                                STRUCTURAL_VIOLATION  missing_field (one per field)
    additionalProperties, unevaluated…      STRUCTURAL_VIOLATION  unexpected_field (one per field)
    type                                    TYPE_MISMATCH         type_mismatch
    a bound (BOUNDS)                        OUT_OF_BOUNDS         out_of_bounds.<keyword>
    anyOf/oneOf, every alternative a type   TYPE_MISMATCH         type_mismatch (types joined)
    anyOf/oneOf, otherwise                  the findings of the alternative that got furthest
    any other keyword                       STRUCTURAL_VIOLATION  schema.<keyword>
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from jsonschema.exceptions import ValidationError

from toolgate.contracts.json_types import json_type
from toolgate.schemas.models import FieldError, TaxonomyClass
from toolgate.taxonomy import GATE_ORDER

Finding = tuple[TaxonomyClass, FieldError]

BOUNDS = {
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "enum",
    "const",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "minContains",
    "maxContains",
}

BOUND_TEXT = {
    "minimum": ">= {}",
    "maximum": "<= {}",
    "exclusiveMinimum": "> {}",
    "exclusiveMaximum": "< {}",
    "multipleOf": "a multiple of {}",
    "minLength": "at least {} characters",
    "maxLength": "at most {} characters",
    "pattern": "a string matching {}",
    "format": "a {}",
    "minItems": "at least {} items",
    "maxItems": "at most {} items",
    "minProperties": "at least {} properties",
    "maxProperties": "at most {} properties",
}


def _path(parts: Iterable[Any]) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def _short(value: Any, limit: int = 80) -> str:
    """The value as JSON, cut at `limit` characters; a long array or object is not written out
    whole only to be cut (the arguments may hold 256 KiB)."""
    text = value if isinstance(value, str) else _preview(value, limit + 1)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _preview(value: Any, room: int) -> str:
    """JSON text of `value`, written only until it is `room` characters long."""
    if isinstance(value, str):
        return json.dumps(value[:room], ensure_ascii=False)
    if not isinstance(value, list | dict):
        return json.dumps(value, ensure_ascii=False)
    items = value if isinstance(value, list) else value.items()
    parts: list[str] = []
    used = 1
    for item in items:
        if used >= room:
            break
        if isinstance(value, dict):
            part = json.dumps(item[0], ensure_ascii=False) + ": " + _preview(item[1], room - used)
        else:
            part = _preview(item, room - used)
        parts.append(part)
        used += len(part) + 2
    return ("[" if isinstance(value, list) else "{") + ", ".join(parts) + ("]" if isinstance(value, list) else "}")


def _bound_expected(error: ValidationError) -> str:
    return bound_expected(str(error.validator), error.validator_value)


def bound_expected(kind: str, value: Any) -> str:
    """What a bound keyword (`kind`, with its schema value) asks for, in words."""
    if kind == "enum" and isinstance(value, list):
        return "one of " + ", ".join(json.dumps(x) for x in value)
    if kind == "const":
        return f"exactly {json.dumps(value)}"
    if kind == "uniqueItems":
        return "unique items"
    return BOUND_TEXT.get(kind, kind + " {}").format(value)


def _type_mismatch(where: list[Any], expected: str, instance: Any) -> Finding:
    name = _path(where) or None
    actual = json_type(instance)
    return TaxonomyClass.TYPE_MISMATCH, FieldError(
        field=name,
        code="type_mismatch",
        expected=expected,
        actual=actual,
        message=f"{name or 'arguments'} must be {expected}, not {actual}",
    )


def _missing(error: ValidationError, where: list[Any]) -> list[Finding]:
    instance, required = error.instance, error.validator_value
    names = required if isinstance(required, list) else []  # a list: the registry checks every schema
    missing = [p for p in names if isinstance(instance, dict) and p not in instance]
    return _structural(where, missing, "missing_field", "is required", expected="present", actual="missing")


def _structural(
    where: list[Any], names: Iterable[Any], code: str, said: str, *, expected: str, actual: str
) -> list[Finding]:
    """One STRUCTURAL_VIOLATION for each field of `names` below `where`: its path, then `said`."""
    return [
        (
            TaxonomyClass.STRUCTURAL_VIOLATION,
            FieldError(field=name, code=code, message=f"{name} {said}", expected=expected, actual=actual),
        )
        for name in (_path([*where, p]) for p in names)
    ]


def _unexpected(error: ValidationError, where: list[Any]) -> list[Finding]:
    instance = error.instance
    schema = error.schema
    allowed = set(schema.get("properties", {})) if isinstance(schema, Mapping) else set()
    extra = [p for p in instance if p not in allowed] if isinstance(instance, dict) else []
    said = "is not a field of this tool"
    return _structural(where, extra, "unexpected_field", said, expected="absent", actual="present") or [
        (
            TaxonomyClass.STRUCTURAL_VIOLATION,
            FieldError(field=_path(where) or None, code="unexpected_field", message=error.message),
        )
    ]


def _wrong_type(error: ValidationError, where: list[Any]) -> list[Finding]:
    value = error.validator_value
    expected = " or ".join(value) if isinstance(value, list) else str(value)
    return [_type_mismatch(where, expected, error.instance)]


def _out_of_bounds(error: ValidationError, where: list[Any]) -> list[Finding]:
    return [bound_finding(where, str(error.validator), error.validator_value, error.instance)]


def bound_finding(where: Sequence[Any], kind: str, bound: Any, instance: Any) -> Finding:
    """The finding of a value at `where` beyond its schema's bound keyword `kind`."""
    name = _path(where) or None
    expected = bound_expected(kind, bound)
    error = FieldError(
        field=name,
        code=f"out_of_bounds.{kind}",
        expected=expected,
        actual=_short(instance),
        message=f"{name or 'arguments'} must be {expected}",
    )
    return TaxonomyClass.OUT_OF_BOUNDS, error


def _alternatives(error: ValidationError, where: list[Any]) -> list[Finding]:
    subs = [classify(sub) for sub in error.context or ()]
    flat = [pair for group in subs for pair in group]
    if all(t is TaxonomyClass.TYPE_MISMATCH for t, _ in flat):
        return [_type_mismatch(where, " or ".join(sorted({e.expected or "" for _, e in flat})), error.instance)]
    # Report the alternative that got furthest: the one whose worst finding is mildest.
    return max(subs, key=lambda group: min((GATE_ORDER.index(t) for t, _ in group), default=len(GATE_ORDER)))


def _other(error: ValidationError, where: list[Any]) -> list[Finding]:
    name = _path(where) or None
    kind = str(error.validator)
    return [
        (TaxonomyClass.STRUCTURAL_VIOLATION, FieldError(field=name, code=f"schema.{kind}", message=error.message[:300]))
    ]


BY_KEYWORD: dict[str, Callable[[ValidationError, list[Any]], list[Finding]]] = {
    "required": _missing,
    "additionalProperties": _unexpected,
    "unevaluatedProperties": _unexpected,
    "type": _wrong_type,
    **dict.fromkeys(BOUNDS, _out_of_bounds),
}


def classify(error: ValidationError) -> list[Finding]:
    """One jsonschema finding as taxonomy classes with field errors."""
    kind = str(error.validator)
    if kind in ("anyOf", "oneOf") and error.context:
        return _alternatives(error, list(error.absolute_path))
    return BY_KEYWORD.get(kind, _other)(error, list(error.absolute_path))


def ordered(findings: Sequence[Finding]) -> tuple[TaxonomyClass, tuple[FieldError, ...]]:
    """The earliest gate the findings fail (GATE_ORDER), and every field error in gate order."""
    worst = min((t for t, _ in findings), key=GATE_ORDER.index)
    in_order = sorted(findings, key=lambda pair: (GATE_ORDER.index(pair[0]), pair[1].field or ""))
    return worst, tuple(e for _, e in in_order)
