"""Compensation: a call that undoes the committed effect of an earlier call.

A proposal names the call it compensates (`compensation_of`, the earlier call's call_id).
Before it runs, execution checks under the earlier key's row lock that there is a committed
effect to undo, that the earlier tool's contract names this tool as its compensation, and
that no other operation compensated it already (the same compensation, re-sent, replays
its result), and that its arguments are exactly those the earlier tool's binding derives from
the earlier call (its arguments and result): a compensation undoes that effect, never another
one its arguments might name. The compensation runs like any call, with its own
idempotency key; in the same transaction as its own result the earlier key becomes
COMPENSATED, or, when the compensation fails, stays COMPLETED marked COMPENSATION_FAILED,
and the compensation's request is dead-lettered for an operator. Pure: the key rows are read
(performer.py) and marked (recording.py's writes) through store/keys.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from toolgate.contracts.registry import Registry
from toolgate.schemas.models import FieldError, StageRecord, TaxonomyClass
from toolgate.schemas.wire import compact_json
from toolgate.states import KeyStatus
from toolgate.workers.validation.decision import apply_defaults


@dataclass(frozen=True)
class Original:
    tenant_id: str
    key: str
    status: KeyStatus
    tool_name: str
    tool_version: str
    compensated_by: str | None
    arguments: dict[str, Any] = field(default_factory=dict)  # the earlier call's, as it ran
    result: dict[str, Any] = field(default_factory=dict)  # the data of its stored result
    events: tuple[str, ...] = ()  # the usage events it may be counted under (value budgets' release)


def check(
    record: StageRecord, key: str, original: Original | None, registry: Registry
) -> tuple[TaxonomyClass, FieldError] | None:
    """Why this compensation (idempotency key `key`) may not run (None: it may)."""
    target = record.call.compensation_of
    if original is None or original.status not in (KeyStatus.COMPLETED, KeyStatus.COMPENSATED):
        return TaxonomyClass.STALE_STATE, FieldError(
            field="compensation_of",
            code="nothing_to_compensate",
            actual=target,
            message=f"call {target} has no committed effect of this tenant to undo",
        )
    earlier = registry.get(original.tool_name, original.tool_version)
    named = earlier.document["transactional"]["compensation_tool"]
    if named != record.call.tool_name:
        return TaxonomyClass.POLICY_VIOLATION, FieldError(
            field="tool_name",
            code="not_its_compensation",
            actual=record.call.tool_name,
            expected=str(named),
            message=f"{record.call.tool_name} is not the compensation of {original.tool_name}",
        )
    template = (earlier.binding.get("compensation") or {}).get("arguments")
    own = registry.get(record.call.tool_name, record.call.tool_version)
    expected = (
        None
        if template is None
        else apply_defaults(own.input_schema, arguments_for(template, original.arguments, original.result))
    )
    if expected != record.call.arguments:
        return TaxonomyClass.POLICY_VIOLATION, FieldError(
            field="arguments",
            code="compensation_mismatch",
            expected=compact_json(expected) if expected is not None else "a compensation template in the binding",
            actual=compact_json(record.call.arguments),
            message=f"a compensation of {target} undoes exactly its effect: use the arguments its binding derives",
        )
    if original.status == KeyStatus.COMPENSATED and original.compensated_by != key:
        return TaxonomyClass.STALE_STATE, FieldError(
            field="compensation_of",
            code="already_compensated",
            actual=target,
            message=f"call {target} was already compensated by another operation",
        )
    return None


def arguments_for(
    template: dict[str, Any], original_arguments: dict[str, Any], result: dict[str, Any]
) -> dict[str, Any]:
    """The compensation call's arguments from the binding's template: {NAME} is an argument of
    the original call, {result.NAME} a field of its result; a template that is exactly one
    placeholder keeps the value's type."""

    def fill(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: fill(v) for k, v in value.items()}
        if isinstance(value, list):
            return [fill(v) for v in value]
        if isinstance(value, str) and value.startswith("{") and value.endswith("}") and value.count("{") == 1:
            name = value[1:-1]
            return (
                result.get(name.removeprefix("result.")) if name.startswith("result.") else original_arguments.get(name)
            )
        return value

    return fill(template)  # type: ignore[no-any-return]
