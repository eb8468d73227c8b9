"""Building ExecutionResults: how one call ended, at whichever stage ended it.

A result must always be deliverable: `encoded` bounds the bytes of every result a stage or
the outbox writes. A result beyond the bound (a provider's huge answer, a dry run's preview of
huge arguments, thousands of field errors) keeps its identity and outcome but withholds its
data, and an effect that did happen is reported as PARTIAL_SUCCESS: done, result withheld.

`result` and `outcome` build their models from values their signatures already type, without
validating them again (`WireModel.built`): execution builds one of each per call, and validated
they were dear (docs/performance.md, "Figures behind the code"). `tests/unit/test_results.py`
holds that validation makes the same models of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypedDict, Unpack

from toolgate.schemas.codec import codec
from toolgate.schemas.identity import identity_of
from toolgate.schemas.models import (
    Call,
    ExecutionResult,
    FieldError,
    Outcome,
    StageRecord,
    TaxonomyClass,
    ToolProposal,
    Verification,
)
from toolgate.taxonomy import vector

MAX_RESULT_BYTES = 512 * 1024
MAX_ERRORS = 50
NO_VERIFICATION = Verification()  # models are frozen: one serves every result without hints


class Overrides(TypedDict, total=False):
    """Where a call's outcome departs from its taxonomy class's response vector
    (toolgate/taxonomy.py): the one list of them, passed through every builder of a refusal."""

    code: int
    is_error: bool
    retryable: bool
    repairable: bool
    requires_approval: bool
    fail_closed: bool
    next_action: str
    retry_after_ms: int | None


def outcome(taxonomy: TaxonomyClass, **overrides: Unpack[Overrides]) -> Outcome:
    """The response vector of `taxonomy`, but for `overrides`; an error unless it is SUCCESS."""
    v = vector(taxonomy)
    values: dict[str, Any] = {
        "taxonomy_class": taxonomy,
        "code": v.code,
        "is_error": taxonomy is not TaxonomyClass.SUCCESS,
        "retryable": v.retryable,
        "repairable": v.repairable,
        "requires_approval": v.requires_approval,
        "fail_closed": v.fail_closed,
        "next_action": v.next_action,
        "retry_after_ms": None,
    }
    values.update(overrides)
    return Outcome.built(values)


def feedback(result_outcome: Outcome, errors: Sequence[FieldError]) -> dict[str, Any]:
    """The seeds' structured feedback object, carried in an error observation's data."""
    return {
        "feedback": {
            "validation_status": "failed",
            "error_code": str(result_outcome.taxonomy_class),
            "repairable": result_outcome.repairable,
            "retryable": result_outcome.retryable,
            "retry_after_ms": result_outcome.retry_after_ms,
            "field_errors": [e.model_dump(exclude_none=True) for e in errors],
            "next_action": result_outcome.next_action,
        }
    }


def result(
    call: Call | ToolProposal,
    *,
    stage: str,
    result_outcome: Outcome,
    traceparent: str,
    home_partition: int,
    now_ms: int,
    data: dict[str, Any] | None = None,
    errors: Sequence[FieldError] = (),
    warnings: Sequence[str] = (),
    tool_version: str | None = None,
    idempotency_hit: bool = False,
    attempt_number: int = 1,
    verification: Verification | None = None,
    approval_id: str | None = None,
    proposal_digest: str | None = None,
) -> ExecutionResult:
    """How `call` ended. A Call carries its proposal's digest; a proposal refused at
    validation is given the digest its signature proved (`proposal_digest`)."""
    if data is None and result_outcome.is_error:
        data = feedback(result_outcome, errors)
    if tool_version is None:
        tool_version = call.tool_version
    return ExecutionResult.built(
        {
            **identity_of(call),
            "traceparent": traceparent,
            "home_partition": home_partition,
            "tool_name": call.tool_name,
            "tool_version": tool_version,
            "stage": stage,
            "outcome": result_outcome,
            "data": dict(data) if data is not None else None,  # a copy, as validation would make
            "errors": list(errors),
            "warnings": list(warnings),
            "idempotency_hit": idempotency_hit,
            "attempt_number": attempt_number,
            "verification": verification or NO_VERIFICATION,
            "approval_id": approval_id,
            "completed_at_ms": now_ms,
            "proposal_digest": (
                proposal_digest
                if proposal_digest is not None
                else (call.proposal_digest if isinstance(call, Call) else "")
            ),
        }
    )


def reject(
    call: Call | ToolProposal,
    taxonomy: TaxonomyClass,
    errors: Sequence[FieldError],
    *,
    stage: str,
    traceparent: str,
    home_partition: int,
    now_ms: int,
    warnings: Sequence[str] = (),
    tool_version: str | None = None,
    approval_id: str | None = None,
    proposal_digest: str | None = None,
    **overrides: Unpack[Overrides],
) -> ExecutionResult:
    return result(
        call,
        stage=stage,
        result_outcome=outcome(taxonomy, **overrides),
        errors=errors,
        traceparent=traceparent,
        home_partition=home_partition,
        now_ms=now_ms,
        warnings=warnings,
        tool_version=tool_version,
        approval_id=approval_id,
        proposal_digest=proposal_digest,
    )


def result_record(
    record: StageRecord, result_outcome: Outcome, stage: str, traceparent: str, now_ms: int, **fields: Any
) -> ExecutionResult:
    """`result` for a call that came as a StageRecord: answered on its home partition, with the
    warnings it carries. `fields`: the rest of `result`'s."""
    return result(
        record.call,
        stage=stage,
        result_outcome=result_outcome,
        traceparent=traceparent,
        home_partition=record.call.home_partition,
        now_ms=now_ms,
        warnings=record.warnings,
        **fields,
    )


def reject_record(
    record: StageRecord,
    taxonomy: TaxonomyClass,
    errors: Sequence[FieldError],
    stage: str,
    traceparent: str,
    now_ms: int,
    *,
    approval_id: str | None = None,
    **overrides: Unpack[Overrides],
) -> ExecutionResult:
    """`reject` for a call that came as a StageRecord (`result_record`)."""
    rejected = outcome(taxonomy, **overrides)
    return result_record(record, rejected, stage, traceparent, now_ms, errors=errors, approval_id=approval_id)


def encoded(res: ExecutionResult) -> bytes:
    """The result's wire bytes, within MAX_RESULT_BYTES (see the module's docstring)."""
    data = codec().encode(res)
    return data if len(data) <= MAX_RESULT_BYTES else codec().encode(withheld(res, len(data)))


def withheld(res: ExecutionResult, size: int) -> ExecutionResult:
    note = f"the result was {size} bytes, beyond the {MAX_RESULT_BYTES} an observation may carry; it was withheld"
    errors = list(res.errors[:MAX_ERRORS])
    if len(res.errors) > MAX_ERRORS:
        errors.append(
            FieldError(field=None, code="more_errors", message=f"{len(res.errors) - MAX_ERRORS} more errors not shown")
        )
    succeeded = res.outcome.taxonomy_class is TaxonomyClass.SUCCESS
    result_outcome = outcome(TaxonomyClass.PARTIAL_SUCCESS) if succeeded else res.outcome
    data = {"withheld": {"reason": "result_too_large", "bytes": size}}
    if not succeeded:
        data = {**feedback(result_outcome, errors), **data}
    return res.model_copy(
        update={
            "outcome": result_outcome,
            "data": data,
            "errors": [e.model_copy(update={"actual": (e.actual or "")[:200] or None}) for e in errors],
            "warnings": [w[:500] for w in res.warnings[:MAX_ERRORS]] + [note],
        }
    )
