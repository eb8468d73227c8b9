"""The validation gates: parse, structure, types, bounds, against the resolved contract.

A pure function of the proposal, the registry and the day (passed in): no I/O, no clock. Each
failure is mapped to the seeds' taxonomy with field-level errors (expected and actual);
when a proposal fails several gates, the outcome names the earliest gate (GATE_ORDER) and
lists its findings. The parse gate is arguments.py; what a schema failure may cost is bounded in
schema_budget.py, and its findings classified in schema_findings.py; the semantic gate
(semantic.py) runs once the facts it needs are read.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import rfc8785

from toolgate.contracts.contract import Contract
from toolgate.contracts.json_types import json_type
from toolgate.contracts.registry import Registry, Resolution
from toolgate.schemas.hashing import payload_hash
from toolgate.schemas.models import FieldError, TaxonomyClass, ToolProposal
from toolgate.workers.validation import schema_budget
from toolgate.workers.validation.arguments import parse_arguments


@dataclass(frozen=True)
class Pass:
    contract: Contract
    arguments: dict[str, Any]
    payload_hash: str
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Reject:
    taxonomy_class: TaxonomyClass
    errors: tuple[FieldError, ...]
    tool_version: str | None = None  # resolved version, when resolution got that far
    warnings: tuple[str, ...] = field(default=())
    work: int = 0  # schema work its findings took (schema_budget.WORK at most)


Decision = Pass | Reject


def decide(proposal: ToolProposal, registry: Registry, today: dt.date) -> Decision:
    arguments, parse_error = parse_arguments(proposal.arguments)
    if parse_error is not None:
        too_large = parse_error.code == "too_large"
        return Reject(TaxonomyClass.OUT_OF_BOUNDS if too_large else TaxonomyClass.SYNTACTIC_PARSE_FAIL, (parse_error,))
    try:
        contract = registry.resolve(proposal.tool_name, proposal.tool_version)
    except Resolution as exc:
        return _unresolved(proposal, exc)
    if contract.sunset_by(today):
        return _sunset(contract)
    warnings = deprecation_warnings(contract)
    rejected = _structure(contract, arguments, warnings)
    if rejected is not None:
        return rejected
    return _canonical(contract, arguments, warnings)


def _unresolved(proposal: ToolProposal, exc: Resolution) -> Reject:
    error = FieldError(
        field=exc.field,
        code=exc.code,
        message=str(exc),
        expected=exc.expected,
        actual=f"{proposal.tool_name} {proposal.tool_version}",
    )
    return Reject(TaxonomyClass.STRUCTURAL_VIOLATION, (error,))


def _sunset(contract: Contract) -> Reject:
    """A deprecated version whose sunset date has come runs no more, like a sunsetted one."""
    error = FieldError(
        field="tool_version",
        code="version_sunsetted",
        message=contract.sunset_notice(),
        expected=contract.instead(),
        actual=f"{contract.name} {contract.version}",
    )
    return Reject(TaxonomyClass.STRUCTURAL_VIOLATION, (error,), contract.version)


def _structure(contract: Contract, arguments: Any, warnings: tuple[str, ...]) -> Reject | None:
    """Structure, types and bounds: an object the contract's input schema accepts."""
    if not isinstance(arguments, dict):
        error = FieldError(
            field=None,
            code="not_an_object",
            expected="object",
            actual=json_type(arguments),
            message="arguments must be a JSON object",
        )
        return Reject(TaxonomyClass.STRUCTURAL_VIOLATION, (error,), contract.version, warnings)
    violation = contract.input_violation(arguments)
    if violation is None:
        return None
    found = schema_budget.findings(contract, arguments, violation)  # bounded by count and work, before the work
    if found is None:
        return None
    return Reject(found.worst, found.errors, contract.version, warnings, found.work)


def _canonical(contract: Contract, arguments: dict[str, Any], warnings: tuple[str, ...]) -> Decision:
    """The arguments with the contract's defaults filled in, and their hash."""
    canonical = apply_defaults(contract.input_schema, arguments)
    try:
        digest = payload_hash(canonical)
    except rfc8785.CanonicalizationError as exc:  # e.g. a lone surrogate escape: not Unicode text
        error = FieldError(
            field=None,
            code="invalid_unicode",
            message=f"arguments contain text that is not valid Unicode: {exc}",
        )
        return Reject(TaxonomyClass.SYNTACTIC_PARSE_FAIL, (error,), contract.version, warnings)
    return Pass(contract, canonical, digest, warnings)


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


def deprecation_warnings(contract: Contract) -> tuple[str, ...]:
    identity = contract.document["identity"]
    if identity["lifecycle"]["status"] != "deprecated":
        return ()
    sunset = identity["lifecycle"].get("sunset_date") or "a date to be announced"
    replacement = identity["lifecycle"].get("replacement")
    use = f"; use {replacement}" if replacement else ""
    return (f"{contract.name} {contract.version} is deprecated and will be sunset on {sunset}{use}",)
