"""Execution's decisions (workers/execution/decision.py): every row of its tables."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.unit.factories import TRACEPARENT, changed, registry, stage_record
from toolgate.contracts.contract import Contract
from toolgate.schemas.hashing import payload_hash
from toolgate.schemas.models import ExecutionResult, FieldError, StageRecord, TaxonomyClass
from toolgate.states import KeyStatus
from toolgate.workers.execution import decision
from toolgate.workers.execution import idempotency as idem
from toolgate.workers.execution.answers import replay, stored_response, verification_for
from toolgate.workers.execution.decision import (
    Answer,
    Concluded,
    Late,
    NotUndone,
    Reserve,
    StoredOutcome,
    Undone,
)
from toolgate.workers.execution.effects import Done, Effect, Failed, Job, Unknown

NOW = 1_700_000_100_000
DRAFT = registry().get("invoice.create_draft", "1.0.0")  # a postgres mutation, audited
FETCH = registry().get("invoice.fetch", "1.0.0")  # a postgres read, not audited
ESTIMATE = registry().get("invoice.tax_estimate", "1.0.0")  # a python read
CHARGE = registry().get("payment.charge_card", "1.0.0")  # an http mutation with a key header


def record(contract: Contract, **overrides: Any) -> StageRecord:
    r = stage_record(contract, overrides.pop("arguments", None), warnings=["from policy"])
    return changed(r, **{"payload_hash": payload_hash(r.call.arguments), **overrides})


def key_of(contract: Contract, r: StageRecord) -> str | None:
    return r.call.idempotency_key if contract.is_mutation else None


def code_of(res: ExecutionResult) -> str | None:
    return res.errors[0].code if res.errors else None


# --- prepare --------------------------------------------------------------------------------


@dataclass(frozen=True)
class PrepareRow:
    id: str
    contract: Contract
    overrides: dict[str, Any]
    expected: type
    taxonomy: TaxonomyClass | None = None
    code: str | None = None


PREPARE = [
    PrepareRow(
        "tampered arguments",
        DRAFT,
        {"payload_hash": "sha256:" + "9" * 64},
        Answer,
        TaxonomyClass.SIGNATURE_MISMATCH,
        "payload_hash_mismatch",
    ),
    PrepareRow(
        "tampered and late: the hash is checked first",
        FETCH,
        {"payload_hash": "sha256:" + "9" * 64, "deadline_ms": NOW - 1},
        Answer,
        TaxonomyClass.SIGNATURE_MISMATCH,
        "payload_hash_mismatch",
    ),
    PrepareRow("a late read", FETCH, {"deadline_ms": NOW - 1}, Answer, TaxonomyClass.TIMEOUT, "deadline_passed"),
    PrepareRow("a read due now", FETCH, {"deadline_ms": NOW}, Answer, TaxonomyClass.TIMEOUT, "deadline_passed"),
    PrepareRow("a late mutation", DRAFT, {"deadline_ms": NOW - 1}, Late),
    PrepareRow("a dry-run mutation", DRAFT, {"dry_run": True}, Answer, TaxonomyClass.SUCCESS),
    PrepareRow("a dry-run read", FETCH, {"dry_run": True}, Answer, TaxonomyClass.SUCCESS),
    PrepareRow("a read in time", FETCH, {"deadline_ms": NOW + 1}, idem.Execute),
    PrepareRow("a python read", ESTIMATE, {}, idem.Execute),
    PrepareRow("a mutation", DRAFT, {}, Reserve),
    PrepareRow("an http mutation", CHARGE, {"deadline_ms": NOW + 1}, Reserve),
]


@pytest.mark.parametrize("row", PREPARE, ids=lambda row: row.id)
def test_prepare(row: PrepareRow) -> None:
    r = record(row.contract, **row.overrides)
    prepared = decision.prepare(r, row.contract, key_of(row.contract, r), TRACEPARENT, NOW)
    assert type(prepared) is row.expected
    if isinstance(prepared, idem.Execute):
        assert prepared == idem.Execute(1)
    if isinstance(prepared, Answer):
        res = prepared.result
        assert res.outcome.taxonomy_class is row.taxonomy
        assert code_of(res) == row.code
        assert (res.call_id, res.warnings, res.approval_id) == (r.call.call_id, r.warnings, r.approval_id)
        assert not res.idempotency_hit


def test_a_late_read_is_not_retryable_and_says_to_repropose() -> None:
    r = record(FETCH, deadline_ms=NOW - 1)
    prepared = decision.prepare(r, FETCH, None, TRACEPARENT, NOW)
    assert isinstance(prepared, Answer)
    assert prepared.result.outcome.retryable is False
    assert prepared.result.outcome.next_action == "repropose_with_new_deadline"


def test_a_dry_run_answers_with_its_preview() -> None:
    r = record(DRAFT, dry_run=True)
    prepared = decision.prepare(r, DRAFT, key_of(DRAFT, r), TRACEPARENT, NOW)
    assert isinstance(prepared, Answer) and prepared.result.data


# --- a late mutation ------------------------------------------------------------------------

STORED = {
    "outcome": {
        "taxonomy_class": "SUCCESS",
        "code": 200,
        "is_error": False,
        "retryable": False,
        "repairable": False,
        "requires_approval": False,
        "fail_closed": False,
        "next_action": "none",
    },
    "data": {"invoice_id": "inv_1"},
    "errors": [],
    "verification": {"post_action_verification_required": False},
    "attempt_number": 2,
}
LATE = record(DRAFT, deadline_ms=NOW - 1)
SAME = LATE.call.request_hash


@dataclass(frozen=True)
class LateRow:
    id: str
    stored: StoredOutcome | None
    replayed: bool
    compensated: bool = False


LATE_ROWS = [
    LateRow("no outcome yet", None, False),
    LateRow("COMPLETED", StoredOutcome(KeyStatus.COMPLETED, SAME, STORED), True),
    LateRow("FAILED_FINAL", StoredOutcome(KeyStatus.FAILED_FINAL, SAME, STORED), True),
    LateRow("COMPENSATED", StoredOutcome(KeyStatus.COMPENSATED, SAME, STORED), True, compensated=True),
    LateRow("COMPLETED, another request", StoredOutcome(KeyStatus.COMPLETED, "sha256:other", STORED), False),
    LateRow("PENDING", StoredOutcome(KeyStatus.PENDING, SAME, None), False),
    LateRow("FAILED_RETRYABLE", StoredOutcome(KeyStatus.FAILED_RETRYABLE, SAME, STORED), False),
    LateRow("EXPIRED", StoredOutcome(KeyStatus.EXPIRED, SAME, STORED), False),
]


@pytest.mark.parametrize("row", LATE_ROWS, ids=lambda row: row.id)
def test_late_answer(row: LateRow) -> None:
    res = decision.late_answer(LATE, TRACEPARENT, row.stored, NOW)
    if row.replayed:
        assert res.idempotency_hit and res.data == STORED["data"] and res.attempt_number == 2
        assert res.verification.post_action_verification_required is row.compensated
        assert any("compensated" in w for w in res.warnings) is row.compensated
    else:
        assert not res.idempotency_hit
        assert (res.outcome.taxonomy_class, code_of(res)) == (TaxonomyClass.TIMEOUT, "deadline_passed")


# --- after the reservation ------------------------------------------------------------------


@dataclass(frozen=True)
class PlanRow:
    id: str
    plan: idem.Plan
    expected: type
    taxonomy: TaxonomyClass | None = None
    code: str | None = None
    retry_after_ms: int | None = None
    hit: bool = False


PLANS = [
    PlanRow("Replay COMPLETED", idem.Replay(STORED, KeyStatus.COMPLETED), Answer, TaxonomyClass.SUCCESS, hit=True),
    PlanRow("Replay COMPENSATED", idem.Replay(STORED, KeyStatus.COMPENSATED), Answer, TaxonomyClass.SUCCESS, hit=True),
    PlanRow("Mismatch", idem.Mismatch(), Answer, TaxonomyClass.SIGNATURE_MISMATCH, "key_reused"),
    PlanRow("Expired", idem.Expired(), Answer, TaxonomyClass.STALE_STATE, "key_expired"),
    PlanRow(
        "Conflict",
        idem.Conflict(4_000),
        Answer,
        TaxonomyClass.IDEMPOTENCY_CONFLICT,
        "in_progress",
        retry_after_ms=4_000,
    ),
    PlanRow("Hold", idem.Hold(), idem.Hold),
    PlanRow("Execute", idem.Execute(2), idem.Execute),
    PlanRow("Execute, taking over", idem.Execute(1, takeover=True), idem.Execute),
]


@pytest.mark.parametrize("row", PLANS, ids=lambda row: row.id)
def test_after_reservation(row: PlanRow) -> None:
    r = record(DRAFT)
    settled = decision.after_reservation(r, TRACEPARENT, row.plan, NOW)
    assert type(settled) is row.expected
    if isinstance(settled, idem.Hold | idem.Execute):
        assert settled == row.plan
    if isinstance(settled, Answer):
        res = settled.result
        assert res.outcome.taxonomy_class is row.taxonomy
        assert res.idempotency_hit is row.hit
        assert res.outcome.retry_after_ms == row.retry_after_ms
        if not row.hit:
            assert code_of(res) == row.code


def test_a_compensated_replay_requires_verification() -> None:
    settled = decision.after_reservation(record(DRAFT), TRACEPARENT, idem.Replay(STORED, KeyStatus.COMPENSATED), NOW)
    assert isinstance(settled, Answer)
    assert settled.result.verification.post_action_verification_required
    assert settled.result.warnings[0] == "from policy" and "compensated" in settled.result.warnings[-1]


@dataclass(frozen=True)
class FollowerRow:
    id: str
    arguments: dict[str, Any] | None
    leader_plan: idem.Plan | None
    expected: idem.Plan | None


FOLLOWERS = [
    FollowerRow("same request: the leader's plan", None, idem.Execute(1), idem.Execute(1)),
    FollowerRow(
        "same request, leader replays",
        None,
        idem.Replay(STORED, KeyStatus.COMPLETED),
        idem.Replay(STORED, KeyStatus.COMPLETED),
    ),
    FollowerRow("same request, leader has no plan", None, None, None),
    FollowerRow("other arguments: Mismatch", {"other": 1}, idem.Execute(1), idem.Mismatch()),
]


@pytest.mark.parametrize("row", FOLLOWERS, ids=lambda row: row.id)
def test_follower_plan(row: FollowerRow) -> None:
    leader = record(DRAFT)
    follower = leader if row.arguments is None else record(DRAFT, arguments=row.arguments)
    assert decision.follower_plan(leader, row.leader_plan, follower) == row.expected


@pytest.mark.parametrize(
    ("contract", "safe"), [(DRAFT, True), (FETCH, True), (CHARGE, True), (ESTIMATE, False)], ids=lambda v: str(v)
)
def test_resend_safe(contract: Contract, safe: bool) -> None:
    assert decision.resend_safe(contract) is safe


# --- after the effect -----------------------------------------------------------------------

DATA = {"invoice_id": "inv_7", "status": "draft"}
FAILED_FINAL = Failed(TaxonomyClass.STALE_STATE, (FieldError(field=None, code="gone", message="m"),), True)
FAILED_AGAIN = Failed(TaxonomyClass.RATE_LIMITED, (FieldError(field=None, code="slow", message="m"),), False, 1500)


@dataclass(frozen=True)
class ConcludeRow:
    id: str
    effect: Effect | None
    status: KeyStatus
    taxonomy: TaxonomyClass
    compensating: bool = False
    plan: idem.Plan | None = field(default_factory=lambda: idem.Execute(3))
    attempt: int = 3
    retryable: bool | None = None
    retry_after_ms: int | None = None
    code: str | None = None


CONCLUDE = [
    ConcludeRow("Done", Done(DATA), KeyStatus.COMPLETED, TaxonomyClass.SUCCESS),
    ConcludeRow(
        "Done, no plan: attempt 1", Done(DATA), KeyStatus.COMPLETED, TaxonomyClass.SUCCESS, plan=None, attempt=1
    ),
    ConcludeRow("Done compensation", Done(DATA), KeyStatus.COMPLETED, TaxonomyClass.SUCCESS, compensating=True),
    ConcludeRow(
        "Failed final", FAILED_FINAL, KeyStatus.FAILED_FINAL, TaxonomyClass.STALE_STATE, retryable=False, code="gone"
    ),
    ConcludeRow(
        "Failed retryable",
        FAILED_AGAIN,
        KeyStatus.FAILED_RETRYABLE,
        TaxonomyClass.RATE_LIMITED,
        retryable=True,
        retry_after_ms=1500,
        code="slow",
    ),
    ConcludeRow(
        "compensation failed final",
        FAILED_FINAL,
        KeyStatus.FAILED_FINAL,
        TaxonomyClass.COMPENSATION_FAILED,
        compensating=True,
        code="gone",
    ),
    ConcludeRow(
        "compensation failed retryable",
        FAILED_AGAIN,
        KeyStatus.FAILED_RETRYABLE,
        TaxonomyClass.COMPENSATION_FAILED,
        compensating=True,
        code="slow",
    ),
    ConcludeRow(
        "Unknown",
        Unknown("timed out"),
        KeyStatus.PENDING,
        TaxonomyClass.TIMEOUT,
        retryable=False,
        code="outcome_unknown",
    ),
    ConcludeRow("no outcome", None, KeyStatus.PENDING, TaxonomyClass.TIMEOUT, retryable=False, code="outcome_unknown"),
]


@pytest.mark.parametrize("row", CONCLUDE, ids=lambda row: row.id)
def test_conclude(row: ConcludeRow) -> None:
    r = record(DRAFT)
    job = Job(r, DRAFT, key_of(DRAFT, r) or "", NOW + 5_000)
    ended = decision.conclude(job, TRACEPARENT, row.plan, row.compensating, row.effect, NOW)
    assert isinstance(ended, Concluded)
    res = ended.result
    assert (ended.status, res.outcome.taxonomy_class, res.attempt_number) == (row.status, row.taxonomy, row.attempt)
    assert code_of(res) == row.code
    assert res.warnings == r.warnings and not res.idempotency_hit
    if row.retryable is not None:
        assert res.outcome.retryable is row.retryable
    assert res.outcome.retry_after_ms == row.retry_after_ms
    if isinstance(row.effect, Done):
        assert res.data == DATA
        assert res.verification.target_state_reference == "invoice:inv_7"
    if ended.status is KeyStatus.PENDING:
        assert res.outcome.code == 202 and res.outcome.next_action == "await_verification"
        assert res.outcome.fail_closed is False
        reason = row.effect.reason if isinstance(row.effect, Unknown) else "no outcome"
        assert res.errors[0].message.startswith(f"{reason}; the outcome is being verified")


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (KeyStatus.COMPLETED, Undone()),
        (KeyStatus.FAILED_FINAL, NotUndone()),
        (KeyStatus.FAILED_RETRYABLE, NotUndone()),
        (KeyStatus.PENDING, None),
    ],
    ids=str,
)
def test_compensation_after(status: KeyStatus, expected: Undone | NotUndone | None) -> None:
    assert decision.compensation_after(status) == expected


def ended(status: KeyStatus | None, *, hit: bool = False) -> ExecutionResult:
    r = record(FETCH)
    res = decision.conclude(Job(r, FETCH, "", NOW), TRACEPARENT, idem.Execute(1), False, Done({}), NOW).result
    return res.model_copy(update={"idempotency_hit": hit})


@pytest.mark.parametrize(
    ("status", "hit", "action"),
    [
        (KeyStatus.COMPLETED, True, "replayed"),
        (None, True, "replayed"),
        (None, False, "refused"),
        (KeyStatus.COMPLETED, False, "executed"),
        (KeyStatus.PENDING, False, "outcome_unknown"),
        (KeyStatus.FAILED_FINAL, False, "failed"),
        (KeyStatus.FAILED_RETRYABLE, False, "failed"),
    ],
)
def test_action(status: KeyStatus | None, hit: bool, action: str) -> None:
    assert decision.action(ended(status, hit=hit), status) == action


@pytest.mark.parametrize(
    ("contract", "status", "audited"),
    [
        (DRAFT, KeyStatus.COMPLETED, True),  # the contract requires an audit
        (FETCH, None, True),  # every refusal is audited
        (FETCH, KeyStatus.COMPLETED, False),
    ],
    ids=str,
)
def test_audited(contract: Contract, status: KeyStatus | None, audited: bool) -> None:
    assert decision.audited(contract, ended(status), status) is audited


def test_an_after_effect_failure_is_a_warning_on_the_result() -> None:
    res = decision.after_effect_failed(ended(KeyStatus.COMPLETED), "duplicate key")
    assert res.warnings[-1] == "the effect happened, but recording it here failed: duplicate key"
    assert res.outcome.taxonomy_class is TaxonomyClass.SUCCESS


# --- answers --------------------------------------------------------------------------------


def test_a_stored_response_replays_as_the_same_result() -> None:
    r = record(DRAFT)
    job = Job(r, DRAFT, key_of(DRAFT, r) or "", NOW)
    first = decision.conclude(job, TRACEPARENT, idem.Execute(2), False, Done(DATA), NOW).result
    again = replay(r, TRACEPARENT, stored_response(first), NOW + 1)
    assert again.idempotency_hit and not first.idempotency_hit
    for name in ("outcome", "data", "errors", "verification", "attempt_number", "call_id", "approval_id"):
        assert getattr(again, name) == getattr(first, name), name


@pytest.mark.parametrize(
    ("contract", "data", "reference"),
    [
        (DRAFT, {"invoice_id": "inv_9"}, "invoice:inv_9"),
        (CHARGE, {"charge_id": "ch_1"}, "charge:ch_1"),
        (FETCH, {"invoice_id": "inv_9"}, None),
    ],
    ids=str,
)
def test_verification_for(contract: Contract, data: dict[str, Any], reference: str | None) -> None:
    r = record(contract)
    v = verification_for(Job(r, contract, "", NOW), data)
    assert v.target_state_reference == reference
    assert v.post_action_verification_required is bool(
        contract.document["transactional"]["post_action_verification_required"]
    )
    if contract is CHARGE:
        assert v.delay_seconds == 5
