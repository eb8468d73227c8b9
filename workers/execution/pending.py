"""A key a crash left PENDING, settled by reconciliation: execution's narrow API for it.

A PENDING key is a call the machine (machine.py) left between Ran and Recorded: its effect
ran, or may have, and how it ended is unknown. Reconciliation (workers/reconciliation/) decides
what the provider's answer means; this module gives it the steps of the same machine that
reach Recorded, with the same asks (asks.py) the driver (performer.py `Performer`) performs:

    step          asks                          the key becomes
    status        CheckStatus                   (the provider's answer, as an Effect)
    complete      RunAfterEffects (if bound)    COMPLETED, with the provider's result (an effect in
                                                parts as parts.judge says, as execution would)
    fail_closed   none                          FAILED_FINAL, UNKNOWN_ERROR, escalated

Pure: the result and the response the key stores are built here, as execution builds them,
so a repeat of the call replays the same answer whoever settled its key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from toolgate.contracts.contract import Contract
from toolgate.schemas.models import ExecutionResult, FieldError, StageRecord, TaxonomyClass
from toolgate.states import KeyStatus
from toolgate.workers.execution import parts
from toolgate.workers.execution.answers import ended, stored_response, verification_for
from toolgate.workers.execution.asks import CheckStatus, RunAfterEffects, Step, ask
from toolgate.workers.execution.decision import after_effect_failed
from toolgate.workers.execution.effects import Done as Done
from toolgate.workers.execution.effects import Effect as Effect
from toolgate.workers.execution.effects import Failed as Failed
from toolgate.workers.execution.effects import Job
from toolgate.workers.execution.idempotency import REDRIVE_OWNER as REDRIVE_OWNER
from toolgate.workers.runtime.results import outcome


@dataclass(frozen=True)
class Pending:
    """A PENDING key's call, as its stored request reads."""

    job: Job

    @property
    def record(self) -> StageRecord:
        return self.job.record


@dataclass(frozen=True)
class Settled:
    """How a PENDING key ends: the call's result, and what the key stores of it."""

    result: ExecutionResult
    status: KeyStatus
    response: dict[str, Any]
    error_code: str | None


def pending(record: StageRecord, contract: Contract, key: str, now: int) -> Pending:
    """The call of a PENDING key, with as long to ask its provider as its contract allows."""
    return Pending(Job(record, contract, key, now + contract.timeout_ms))


def status(call: Pending, now: int) -> Step[Effect]:
    """Ask the provider's status query how the call's effect ended."""
    return ask(CheckStatus(call.job, now))


def complete(call: Pending, data: dict[str, Any], stage: str, now: int) -> Step[Settled]:
    """The provider completed the call: COMPLETED with its result, and the binding's after_effect
    run in the transaction that records it (once, with COMPLETED)."""
    r, job = call.record, call.job
    judged = parts.judge(job.contract, r.call.arguments, data)
    verification = verification_for(job, data)
    res = ended(
        r,
        stage,
        r.traceparent,
        r.attempt,
        now,
        judged.outcome,
        data=judged.data,
        errors=judged.errors,
        verification=verification,
    )
    if judged.status is not KeyStatus.COMPLETED:
        return Settled(res, judged.status, stored_response(res), judged.outcome.taxonomy_class.value)
    if "after_effect" in job.contract.binding:
        [error] = yield from ask(RunAfterEffects(((job, data),)))
        if error is not None:
            res = after_effect_failed(res, error)
    return Settled(res, KeyStatus.COMPLETED, stored_response(res), None)


def fail_closed(call: Pending, message: str, stage: str, now: int) -> Settled:
    """Whether the effect happened cannot be known: FAILED_FINAL, fail-closed, for an operator."""
    r = call.record
    unverifiable = outcome(TaxonomyClass.UNKNOWN_ERROR, fail_closed=True, next_action="escalate_to_operator")
    errors = [FieldError(field=None, code="outcome_unverifiable", message=message)]
    # attempt_number 1, as the fail-closed answer has always carried.
    res = ended(r, stage, r.traceparent, 1, now, unverifiable, errors=errors)
    return Settled(res, KeyStatus.FAILED_FINAL, stored_response(res), TaxonomyClass.UNKNOWN_ERROR.value)
