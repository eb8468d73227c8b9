"""What execution answers a call with, besides running it: refusals, replays, and the
response a key stores so that a repeat is answered the same way.

Pure: builders of ExecutionResults for the decisions (decision.py) and for reconciliation,
which settles keys with the same stored response and verification.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Unpack

from toolgate.contracts.templates import fill
from toolgate.refusal import Refusal
from toolgate.schemas.models import ExecutionResult, FieldError, Outcome, StageRecord, TaxonomyClass, Verification
from toolgate.workers.execution.effects import Job
from toolgate.workers.runtime.results import Overrides, reject_record, result, result_record

STAGE = "execution"


@dataclass(frozen=True)
class Blocked(Refusal):
    """A refusal that answers the call: its code and reason, and the taxonomy class it fails with."""

    taxonomy: TaxonomyClass


DEADLINE_PASSED = Blocked(
    "deadline_passed",
    "the proposal's deadline passed before it could run; nothing was executed",
    TaxonomyClass.TIMEOUT,
)


def stored_response(res: ExecutionResult) -> dict[str, Any]:
    """What a key keeps of its result, to replay it."""
    return {
        "outcome": res.outcome.model_dump(mode="json"),
        "data": res.data,
        "errors": [e.model_dump(mode="json") for e in res.errors],
        "verification": res.verification.model_dump(mode="json"),
        "attempt_number": res.attempt_number,
    }


def verification_for(job: Job, data: dict[str, Any]) -> Verification:
    spec = job.contract.binding.get("verification")
    required = bool(job.contract.document["transactional"]["post_action_verification_required"])
    if not spec:
        return Verification(post_action_verification_required=required)
    return Verification(
        post_action_verification_required=required,
        target_state_reference=fill(spec["target_state_reference"], {**job.record.call.arguments, **data}),
        expected_state=spec.get("expected_state"),
        delay_seconds=int(spec.get("delay_seconds", 0)),
    )


def ended(
    record: StageRecord, stage: str, traceparent: str, attempt: int, now: int, result_outcome: Outcome, **fields: Any
) -> ExecutionResult:
    """How attempt `attempt` of the call's effect ended: as execution concludes it, or as
    reconciliation settles a key the crash left PENDING. `fields`: the rest of `result`'s."""
    return result_record(
        record,
        result_outcome,
        stage,
        traceparent,
        now,
        attempt_number=attempt,
        approval_id=record.approval_id,
        **fields,
    )


def refuse(
    record: StageRecord, traceparent: str, blocked: Blocked, now: int, **overrides: Unpack[Overrides]
) -> ExecutionResult:
    """The answer to a call that may not run, and ran nothing: `blocked` says why."""
    error = FieldError(field=None, code=blocked.code, message=blocked.reason)
    return reject_record(
        record, blocked.taxonomy, [error], STAGE, traceparent, now, approval_id=record.approval_id, **overrides
    )


def refuse_compensation(
    record: StageRecord, traceparent: str, taxonomy: TaxonomyClass, error: FieldError, now: int
) -> ExecutionResult:
    """A compensation that may not run (compensation.check said why)."""
    return reject_record(record, taxonomy, [error], STAGE, traceparent, now)


def deadline_passed(record: StageRecord, traceparent: str, now: int) -> ExecutionResult:
    return refuse(record, traceparent, DEADLINE_PASSED, now, retryable=False, next_action="repropose_with_new_deadline")


def replay(
    record: StageRecord, traceparent: str, stored: dict[str, Any], now: int, compensated: bool = False
) -> ExecutionResult:
    """A stored outcome, answered again (idempotency_hit)."""
    warnings = list(record.warnings)
    verification = Verification.model_validate(stored["verification"]) if stored.get("verification") else None
    if compensated:
        # Seeds: return the compensated state and require post-action verification.
        warnings.append("this call's effect was compensated (undone) by a later call; verify the target's state")
        verification = (verification or Verification()).model_copy(update={"post_action_verification_required": True})
    return result(
        record.call,
        stage=STAGE,
        result_outcome=Outcome.model_validate(stored["outcome"]),
        traceparent=traceparent,
        home_partition=record.call.home_partition,
        now_ms=now,
        data=stored.get("data"),
        errors=[FieldError.model_validate(e) for e in stored.get("errors", [])],
        warnings=warnings,
        idempotency_hit=True,
        attempt_number=int(stored.get("attempt_number", 1)),
        verification=verification,
        approval_id=record.approval_id,
    )
