"""Execution's decisions: what each call gets, given what the round read and the time.

Pure: the record, its contract, the state read from Postgres (the key's plan, a stored
outcome, the effect's end) and `now` come in; a closed set of outcomes comes out. The handler
(handler.py) reads, runs effects and writes; it never decides.

Before anything (`prepare`):

    arguments do not hash to the payload hash   -> Answer SIGNATURE_MISMATCH (nothing runs)
    deadline passed, a read                     -> Answer TIMEOUT deadline_passed
    deadline passed, a mutation                 -> Late (replays a stored outcome, else TIMEOUT)
    dry run                                     -> Answer SUCCESS with a preview of the call
    a read                                      -> Execute(1): it runs
    a mutation                                  -> Reserve (idempotency.plan decides)

A late mutation (`late_answer`): a COMPLETED / FAILED_FINAL / COMPENSATED outcome of the same
request is replayed; anything else is TIMEOUT deadline_passed.

After the reservation committed (`after_reservation`), by the key's plan:

    Replay    -> Answer the stored outcome again (idempotency_hit; COMPENSATED says so)
    Mismatch  -> Answer SIGNATURE_MISMATCH key_reused
    Expired   -> Answer STALE_STATE key_expired
    Conflict  -> Answer IDEMPOTENCY_CONFLICT in_progress, retry after the lease
    Hold      -> Hold: no answer now (its owner or reconciliation answers)
    Execute   -> Execute: it runs

A call repeating an earlier call of the same round and key (`follower_plan`) shares its plan,
or is a Mismatch when its request differs.

After the effect (`conclude`), the key's status and the result:

    Done                         -> as parts.judge says: COMPLETED, SUCCESS with the data and its
                                    verification; an effect in parts may be PARTIAL_SUCCESS or
                                    COMPENSATION_REQUIRED (COMPLETED), or nothing done (FAILED_*)
    Failed, of a compensation    -> FAILED_FINAL / FAILED_RETRYABLE, COMPENSATION_FAILED
    Failed                       -> FAILED_FINAL / FAILED_RETRYABLE, the failure's class
    Unknown (or no outcome)      -> PENDING, TIMEOUT 202 await_verification

and for a compensation (`compensation_after`): COMPLETED -> Undone (the earlier key becomes
COMPENSATED); FAILED_* -> NotUndone (the earlier key is marked COMPENSATION_FAILED and this
request dead-lettered); PENDING -> nothing yet.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from toolgate.contracts.contract import Contract
from toolgate.schemas.models import ExecutionResult, FieldError, Outcome, StageRecord, TaxonomyClass
from toolgate.states import ENDED, KeyStatus
from toolgate.workers.execution import answers, clearance, parts
from toolgate.workers.execution import idempotency as idem
from toolgate.workers.execution.answers import STAGE, Blocked, deadline_passed, refuse, replay, verification_for
from toolgate.workers.execution.effects import Done, Effect, Failed, Job, Unknown
from toolgate.workers.execution.preview import preview
from toolgate.workers.runtime.results import outcome, result_record


@dataclass(frozen=True)
class Answer:
    """The call is answered now, without running anything."""

    result: ExecutionResult


@dataclass(frozen=True)
class Late:
    """A mutation past its deadline: it runs nothing and reserves nothing, but may replay."""


@dataclass(frozen=True)
class Reserve:
    """A mutation: its idempotency key, reserved or read under lock, decides."""


# What runs is the plan Execute: the call's effect runs, as that attempt of its operation; a key
# in flight elsewhere is the plan Hold: no answer now, its owner or reconciliation answers.
Prepared = Answer | Late | Reserve | idem.Execute
Settled = Answer | idem.Hold | idem.Execute


@dataclass(frozen=True)
class Concluded:
    """How an effect that ran ends: the call's result and its key's status."""

    result: ExecutionResult
    status: KeyStatus


@dataclass(frozen=True)
class Undone:
    """A compensation completed: the earlier key becomes COMPENSATED."""


@dataclass(frozen=True)
class NotUndone:
    """A compensation failed: the earlier effect stays, marked COMPENSATION_FAILED; an operator decides."""


@dataclass(frozen=True)
class StoredOutcome:
    """A key's stored outcome, as a late call reads it."""

    status: KeyStatus
    request_hash: str
    response: dict[str, Any] | None


# --- before the reservation ------------------------------------------------------------------


def prepare(record: StageRecord, contract: Contract, key: str | None, traceparent: str, now: int) -> Prepared:
    """What a call gets before anything is read (`key`: its idempotency key; None: a read)."""
    tampered = clearance.hash_intact(record)
    if tampered is not None:
        return Answer(refuse(record, traceparent, tampered, now))
    if record.call.deadline_ms is not None and record.call.deadline_ms <= now:
        return Answer(deadline_passed(record, traceparent, now)) if key is None else Late()
    if record.call.dry_run:
        previewed = preview(record, contract, key)
        return Answer(result_record(record, outcome(TaxonomyClass.SUCCESS), STAGE, traceparent, now, data=previewed))
    if key is None:
        return idem.Execute(1)
    return Reserve()


def late_answer(record: StageRecord, traceparent: str, stored: StoredOutcome | None, now: int) -> ExecutionResult:
    """A late mutation replays its operation's outcome, if it has one, as any repeat does: an
    agent never hears two different ends of one operation. Otherwise its deadline passed."""
    if stored is not None and stored.status in ENDED and stored.request_hash == record.call.request_hash:
        return replay(
            record, traceparent, stored.response or {}, now, compensated=stored.status == KeyStatus.COMPENSATED
        )
    return deadline_passed(record, traceparent, now)


def resend_safe(contract: Contract) -> bool:
    """Whether re-running the effect under the same key cannot do it twice."""
    kind = contract.executor["kind"]
    return kind == "postgres" or (kind == "http" and bool(contract.document["idempotency"].get("key_header")))


# --- after the reservation -------------------------------------------------------------------


# The plans that refuse the call, and how.
_REFUSALS: dict[type[idem.Mismatch | idem.Expired | idem.Conflict], Blocked] = {
    idem.Mismatch: Blocked(
        "key_reused",
        "this idempotency key was used with different arguments; refusing (fail closed)",
        TaxonomyClass.SIGNATURE_MISMATCH,
    ),
    idem.Expired: Blocked(
        "key_expired",
        "this operation's idempotency key outlived its deduplication window; propose it as a new "
        "logical operation if it should still happen",
        TaxonomyClass.STALE_STATE,
    ),
    idem.Conflict: Blocked(
        "in_progress",
        "the same operation is in progress; retry after the delay",
        TaxonomyClass.IDEMPOTENCY_CONFLICT,
    ),
}


def follower_plan(leader: StageRecord, leader_plan: idem.Plan | None, record: StageRecord) -> idem.Plan | None:
    """A call repeating an earlier call of the round under the same key shares its plan."""
    return idem.Mismatch() if leader.call.request_hash != record.call.request_hash else leader_plan


def after_reservation(record: StageRecord, traceparent: str, plan: idem.Plan, now: int) -> Settled:
    """What a keyed call gets once its key's plan is known: an answer without any effect, or its run."""
    if isinstance(plan, idem.Replay):
        return Answer(replay(record, traceparent, plan.response, now, compensated=plan.status == KeyStatus.COMPENSATED))
    if isinstance(plan, idem.Hold | idem.Execute):
        return plan
    retry_after_ms = plan.retry_after_ms if isinstance(plan, idem.Conflict) else None
    return Answer(refuse(record, traceparent, _REFUSALS[type(plan)], now, retry_after_ms=retry_after_ms))


# --- after the effect ------------------------------------------------------------------------


def conclude(
    job: Job, traceparent: str, plan: idem.Plan | None, compensating: bool, effect: Effect | None, now: int
) -> Concluded:
    """The result of an effect that ran (`effect` None: it gave no outcome) and its key's status."""
    r = job.record
    attempt = plan.attempt if isinstance(plan, idem.Execute) else 1

    def ended(result_outcome: Outcome, status: KeyStatus, **fields: Any) -> Concluded:
        return Concluded(answers.ended(r, STAGE, traceparent, attempt, now, result_outcome, **fields), status)

    if isinstance(effect, Done):
        judged = parts.judge(job.contract, r.call.arguments, effect.data)
        return ended(
            judged.outcome,
            judged.status,
            data=judged.data,
            errors=judged.errors,
            verification=verification_for(job, effect.data),
        )
    if isinstance(effect, Failed):
        status = KeyStatus.FAILED_FINAL if effect.final else KeyStatus.FAILED_RETRYABLE
        if compensating:
            # A failed compensation leaves the earlier effect in place: an operator decides.
            return ended(outcome(TaxonomyClass.COMPENSATION_FAILED), status, errors=effect.errors)
        failure = outcome(effect.taxonomy, retryable=not effect.final, retry_after_ms=effect.retry_after_ms)
        return ended(failure, status, errors=effect.errors)
    reason = effect.reason if isinstance(effect, Unknown) else "no outcome"
    unknown = outcome(
        TaxonomyClass.TIMEOUT, code=202, retryable=False, fail_closed=False, next_action="await_verification"
    )
    message = f"{reason}; the outcome is being verified with the provider and will be reported on this call"
    return ended(unknown, KeyStatus.PENDING, errors=[FieldError(field=None, code="outcome_unknown", message=message)])


def after_effect_failed(res: ExecutionResult, error: str) -> ExecutionResult:
    """The effect happened, but the binding's after_effect that records it failed: say so."""
    note = f"the effect happened, but recording it here failed: {error}"
    return res.model_copy(update={"warnings": [*res.warnings, note]})


def compensation_after(status: KeyStatus) -> Undone | NotUndone | None:
    """What a compensation's end means for the earlier call it undoes."""
    if status == KeyStatus.COMPLETED:
        return Undone()
    if status in (KeyStatus.FAILED_FINAL, KeyStatus.FAILED_RETRYABLE):
        return NotUndone()
    return None


def action(res: ExecutionResult, status: KeyStatus | None) -> str:
    """The audit action of a call's end (`status` None: no key was settled)."""
    if res.idempotency_hit:
        return "replayed"
    if status is None:
        return "refused"
    return {KeyStatus.COMPLETED: "executed", KeyStatus.PENDING: "outcome_unknown"}.get(status, "failed")


def audited(contract: Contract, res: ExecutionResult, status: KeyStatus | None) -> bool:
    """Every end of an audited tool's call is audited, and every refusal of any call."""
    return bool(contract.document["observability"]["audit_required"]) or action(res, status) == "refused"
