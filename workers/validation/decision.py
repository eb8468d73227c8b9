"""The validation gates: parse, structure, types, bounds, against the resolved contract.

A pure function of the proposal, the registry and nothing else: no I/O, no clock. Each
failure is mapped to the seeds' taxonomy with field-level errors (expected and actual);
when a proposal fails several gates, the outcome names the earliest gate and lists every
finding.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import rfc8785
from jsonschema.exceptions import ValidationError

from toolgate.contracts.registry import Contract, Registry, Resolution
from toolgate.hashing import payload_hash
from toolgate.schemas.models import FieldError, ToolProposal
from toolgate.taxonomy import GATE_ORDER, Taxonomy

MAX_ARGUMENTS_BYTES = 256 * 1024

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


@dataclass(frozen=True)
class Pass:
    contract: Contract
    arguments: dict[str, Any]
    payload_hash: str
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Reject:
    taxonomy: Taxonomy
    errors: tuple[FieldError, ...]
    tool_version: str | None = None  # resolved version, when resolution got that far
    warnings: tuple[str, ...] = field(default=())


Decision = Pass | Reject


class _DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _DuplicateKey(key)
        seen[key] = value
    return seen


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def parse_arguments(text: str) -> tuple[Any, FieldError | None]:
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:  # bytes that were not UTF-8, kept as lone surrogates
        return None, FieldError(
            field=None,
            code="invalid_utf8",
            message=f"the argument text is not valid UTF-8 (at character {exc.start}); send UTF-8 JSON",
            expected="UTF-8 text",
            actual="invalid byte sequence",
        )
    if size > MAX_ARGUMENTS_BYTES:
        return None, FieldError(
            field=None,
            code="too_large",
            message=f"arguments exceed {MAX_ARGUMENTS_BYTES} bytes",
            expected=f"<= {MAX_ARGUMENTS_BYTES} bytes",
            actual=f"{len(text)} characters",
        )
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant), None
    except _DuplicateKey as exc:
        return None, FieldError(
            field=str(exc), code="duplicate_key", message=f"key {exc} appears twice; the meaning would be ambiguous"
        )
    except json.JSONDecodeError as exc:
        return None, FieldError(
            field=None,
            code="invalid_json",
            message=f"arguments are not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
            expected="a JSON object",
            actual=_snippet(text, exc.pos),
        )
    except (ValueError, RecursionError) as exc:
        return None, FieldError(
            field=None, code="invalid_json", message=f"arguments are not valid JSON: {exc}", expected="a JSON object"
        )


def _snippet(text: str, pos: int) -> str:
    start = max(0, pos - 15)
    return text[start : pos + 15]


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _path(parts: Iterable[Any]) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value
    return text if len(text) <= 80 else text[:77] + "..."


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


def _bound_expected(error: ValidationError) -> str:
    value, kind = error.validator_value, str(error.validator)
    if kind == "enum":
        return "one of " + ", ".join(json.dumps(x) for x in value)
    if kind == "const":
        return f"exactly {json.dumps(value)}"
    if kind == "uniqueItems":
        return "unique items"
    return BOUND_TEXT.get(kind, kind + " {}").format(value)


def _type_mismatch(where: list[Any], expected: str, instance: Any) -> tuple[Taxonomy, FieldError]:
    name = _path(where) or None
    actual = json_type(instance)
    return Taxonomy.TYPE_MISMATCH, FieldError(
        field=name,
        code="type_mismatch",
        expected=expected,
        actual=actual,
        message=f"{name or 'arguments'} must be {expected}, not {actual}",
    )


def classify(error: ValidationError) -> list[tuple[Taxonomy, FieldError]]:
    """One jsonschema finding as taxonomy classes with field errors."""
    where = list(error.absolute_path)
    kind = str(error.validator)
    instance = error.instance
    if kind == "required":
        missing = [p for p in error.validator_value if isinstance(instance, dict) and p not in instance]
        return [
            (
                Taxonomy.STRUCTURAL_VIOLATION,
                FieldError(
                    field=_path([*where, p]),
                    code="missing_field",
                    message=f"{_path([*where, p])} is required",
                    expected="present",
                    actual="missing",
                ),
            )
            for p in missing
        ]
    if kind in ("additionalProperties", "unevaluatedProperties"):
        allowed = set(error.schema.get("properties", {}))
        extra = [p for p in instance if p not in allowed] if isinstance(instance, dict) else []
        return [
            (
                Taxonomy.STRUCTURAL_VIOLATION,
                FieldError(
                    field=_path([*where, p]),
                    code="unexpected_field",
                    message=f"{_path([*where, p])} is not a field of this tool",
                    expected="absent",
                    actual="present",
                ),
            )
            for p in extra
        ] or [
            (
                Taxonomy.STRUCTURAL_VIOLATION,
                FieldError(field=_path(where) or None, code="unexpected_field", message=error.message),
            )
        ]
    if kind == "type":
        value = error.validator_value
        return [_type_mismatch(where, value if isinstance(value, str) else " or ".join(value), instance)]
    if kind in BOUNDS:
        name = _path(where) or None
        expected = _bound_expected(error)
        return [
            (
                Taxonomy.OUT_OF_BOUNDS,
                FieldError(
                    field=name,
                    code=f"out_of_bounds.{kind}",
                    expected=expected,
                    actual=_short(instance),
                    message=f"{name or 'arguments'} must be {expected}",
                ),
            )
        ]
    if kind in ("anyOf", "oneOf") and error.context:
        subs = [classify(sub) for sub in error.context]
        flat = [pair for group in subs for pair in group]
        if all(t is Taxonomy.TYPE_MISMATCH for t, _ in flat):
            return [_type_mismatch(where, " or ".join(sorted({e.expected or "" for _, e in flat})), instance)]
        # Report the alternative that got furthest: the one whose worst finding is mildest.
        return max(subs, key=lambda group: min((GATE_ORDER.index(t) for t, _ in group), default=len(GATE_ORDER)))
    name = _path(where) or None
    return [(Taxonomy.STRUCTURAL_VIOLATION, FieldError(field=name, code=f"schema.{kind}", message=error.message[:300]))]


def apply_defaults(schema: Mapping[str, Any], value: Any) -> Any:
    """Fill in `default`s of object properties the value leaves out, recursively."""
    if isinstance(value, dict) and schema.get("type") in ("object", None):
        props = schema.get("properties", {})
        out = dict(value)
        for name, sub in props.items():
            if name not in out and isinstance(sub, dict) and "default" in sub:
                out[name] = sub["default"]
            if name in out and isinstance(sub, dict):
                out[name] = apply_defaults(sub, out[name])
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [apply_defaults(schema["items"], v) for v in value]
    return value


def _worst(findings: list[tuple[Taxonomy, FieldError]]) -> Taxonomy:
    return min((t for t, _ in findings), key=GATE_ORDER.index)


def decide(proposal: ToolProposal, registry: Registry) -> Decision:
    arguments, parse_error = parse_arguments(proposal.arguments)
    if parse_error is not None:
        taxonomy = Taxonomy.OUT_OF_BOUNDS if parse_error.code == "too_large" else Taxonomy.SYNTACTIC_PARSE_FAIL
        return Reject(taxonomy, (parse_error,))
    try:
        contract = registry.resolve(proposal.tool_name, proposal.tool_version)
    except Resolution as exc:
        return Reject(
            Taxonomy.STRUCTURAL_VIOLATION,
            (
                FieldError(
                    field=exc.field,
                    code=exc.code,
                    message=str(exc),
                    expected="a registered tool and version",
                    actual=f"{proposal.tool_name} {proposal.tool_version}",
                ),
            ),
        )
    warnings = deprecation_warnings(contract)
    if not isinstance(arguments, dict):
        return Reject(
            Taxonomy.STRUCTURAL_VIOLATION,
            (
                FieldError(
                    field=None,
                    code="not_an_object",
                    expected="object",
                    actual=json_type(arguments),
                    message="arguments must be a JSON object",
                ),
            ),
            contract.version,
            warnings,
        )
    findings = (
        []
        if contract.accepts_input(arguments)
        else [pair for error in contract.input_validator.iter_errors(arguments) for pair in classify(error)]
    )
    if findings:
        ordered = sorted(findings, key=lambda pair: (GATE_ORDER.index(pair[0]), pair[1].field or ""))
        return Reject(_worst(findings), tuple(e for _, e in ordered), contract.version, warnings)
    canonical = apply_defaults(contract.input_schema, arguments)
    try:
        digest = payload_hash(canonical)
    except rfc8785.CanonicalizationError as exc:  # e.g. a lone surrogate escape: not Unicode text
        return Reject(
            Taxonomy.SYNTACTIC_PARSE_FAIL,
            (
                FieldError(
                    field=None,
                    code="invalid_unicode",
                    message=f"arguments contain text that is not valid Unicode: {exc}",
                ),
            ),
            contract.version,
            warnings,
        )
    return Pass(contract, canonical, digest, warnings)


def deprecation_warnings(contract: Contract) -> tuple[str, ...]:
    identity = contract.document["identity"]
    if identity["lifecycle"]["status"] != "deprecated":
        return ()
    sunset = identity["lifecycle"].get("sunset_date") or "a date to be announced"
    replacement = identity["lifecycle"].get("replacement")
    use = f"; use {replacement}" if replacement else ""
    return (f"{contract.name} {contract.version} is deprecated and will be sunset on {sunset}{use}",)
