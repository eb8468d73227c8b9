"""The idempotency state model (workers/execution/idempotency.py): every row of its table."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pytest

from toolgate.states import KeyStatus
from toolgate.workers.execution.idempotency import (
    REDRIVE_OWNER,
    Conflict,
    Execute,
    Expired,
    Hold,
    KeyRow,
    Mismatch,
    Plan,
    Replay,
    plan,
)

NOW = 1_700_000_000_000
HASH = "sha256:" + "1" * 64
ME = "execution-worker-1"
OTHER = "execution-worker-2"
RESPONSE = {"invoice_id": "inv_1", "status": "draft"}


def row(status: KeyStatus, **overrides: Any) -> KeyRow:
    base = KeyRow(
        status=status,
        request_hash=HASH,
        call_id="call_1",
        attempt=1,
        lease_owner=None,
        lease_until_ms=None,
        response=RESPONSE,
        error_code=None,
        expires_at_ms=NOW + 86_400_000,
    )
    return replace(base, **overrides)


@dataclass(frozen=True)
class Row:
    id: str
    row: KeyRow | None
    expected: Plan
    call_id: str = "call_1"
    request_hash: str = HASH
    max_attempts: int = 3
    resend_safe: bool = False


TABLE = [
    Row("no record", None, Execute(1)),
    Row("hash mismatch", row(KeyStatus.COMPLETED), Mismatch(), request_hash="sha256:" + "2" * 64),
    Row(
        "hash mismatch pending",
        row(KeyStatus.PENDING, lease_owner=OTHER, lease_until_ms=NOW + 5000),
        Mismatch(),
        request_hash="sha256:" + "2" * 64,
    ),
    Row("COMPLETED replay", row(KeyStatus.COMPLETED), Replay(RESPONSE, KeyStatus.COMPLETED)),
    Row(
        "COMPLETED replay for another call",
        row(KeyStatus.COMPLETED, call_id="call_0"),
        Replay(RESPONSE, KeyStatus.COMPLETED),
    ),
    Row("FAILED_FINAL replay", row(KeyStatus.FAILED_FINAL, error_code="E"), Replay(RESPONSE, KeyStatus.FAILED_FINAL)),
    Row("COMPENSATED replay", row(KeyStatus.COMPENSATED), Replay(RESPONSE, KeyStatus.COMPENSATED)),
    Row("COMPLETED without response", row(KeyStatus.COMPLETED, response=None), Replay({}, KeyStatus.COMPLETED)),
    Row("FAILED_RETRYABLE attempts left", row(KeyStatus.FAILED_RETRYABLE, attempt=2), Execute(3)),
    Row(
        "FAILED_RETRYABLE none left",
        row(KeyStatus.FAILED_RETRYABLE, attempt=3),
        Replay(RESPONSE, KeyStatus.FAILED_FINAL),
    ),
    Row(
        "FAILED_RETRYABLE beyond max",
        row(KeyStatus.FAILED_RETRYABLE, attempt=5),
        Replay(RESPONSE, KeyStatus.FAILED_FINAL),
    ),
    Row("PENDING own lease", row(KeyStatus.PENDING, attempt=2, lease_owner=ME, lease_until_ms=NOW + 5000), Execute(2)),
    Row("PENDING own expired lease", row(KeyStatus.PENDING, lease_owner=ME, lease_until_ms=NOW - 5000), Execute(1)),
    Row(
        "PENDING redrive owner",
        row(KeyStatus.PENDING, attempt=2, lease_owner=REDRIVE_OWNER, lease_until_ms=NOW + 5000),
        Execute(2, takeover=True),
    ),
    Row(
        "PENDING expired lease resend-safe",
        row(KeyStatus.PENDING, lease_owner=OTHER, lease_until_ms=NOW - 1),
        Execute(1, takeover=True),
        resend_safe=True,
    ),
    Row(
        "PENDING lease ends now resend-safe",
        row(KeyStatus.PENDING, lease_owner=OTHER, lease_until_ms=NOW),
        Execute(1, takeover=True),
        resend_safe=True,
    ),
    Row("PENDING no lease resend-safe", row(KeyStatus.PENDING), Execute(1, takeover=True), resend_safe=True),
    Row(
        "PENDING expired lease not resend-safe same call",
        row(KeyStatus.PENDING, lease_owner=OTHER, lease_until_ms=NOW - 1),
        Hold(),
    ),
    Row(
        "PENDING expired lease not resend-safe other call",
        row(KeyStatus.PENDING, call_id="call_0", lease_owner=OTHER, lease_until_ms=NOW - 1),
        Conflict(1000),
        call_id="call_1",
    ),
    Row("PENDING same call leased", row(KeyStatus.PENDING, lease_owner=OTHER, lease_until_ms=NOW + 5000), Hold()),
    Row(
        "PENDING same call leased resend-safe",
        row(KeyStatus.PENDING, lease_owner=OTHER, lease_until_ms=NOW + 5000),
        Hold(),
        resend_safe=True,
    ),
    Row(
        "PENDING other call leased",
        row(KeyStatus.PENDING, call_id="call_0", lease_owner=OTHER, lease_until_ms=NOW + 5000),
        Conflict(5000),
    ),
    Row(
        "PENDING other call short lease",
        row(KeyStatus.PENDING, call_id="call_0", lease_owner=OTHER, lease_until_ms=NOW + 10),
        Conflict(1000),
    ),
    Row(
        "PENDING past expiry still pending",
        row(KeyStatus.PENDING, lease_owner=OTHER, lease_until_ms=NOW + 5000, expires_at_ms=NOW - 1),
        Hold(),
    ),
    # Past the deduplication window: an operation that ended never runs again.
    Row(
        "EXPIRED from COMPLETED, same request: replayed from the ledger",
        row(KeyStatus.EXPIRED, expired_from=KeyStatus.COMPLETED),
        Replay(RESPONSE, KeyStatus.COMPLETED),
    ),
    Row(
        "EXPIRED from FAILED_FINAL, same request: its failure replayed",
        row(KeyStatus.EXPIRED, expired_from=KeyStatus.FAILED_FINAL, error_code="E"),
        Replay(RESPONSE, KeyStatus.FAILED_FINAL),
    ),
    Row(
        "EXPIRED from COMPENSATED, same request: replayed, saying so",
        row(KeyStatus.EXPIRED, expired_from=KeyStatus.COMPENSATED),
        Replay(RESPONSE, KeyStatus.COMPENSATED),
    ),
    Row(
        "EXPIRED tombstone (outcome stripped), same request: refused",
        row(KeyStatus.EXPIRED, expired_from=KeyStatus.COMPLETED, response=None),
        Expired(),
    ),
    Row(
        "EXPIRED from COMPLETED, another request: a new operation",
        row(KeyStatus.EXPIRED, expired_from=KeyStatus.COMPLETED),
        Execute(1),
        request_hash="sha256:" + "2" * 64,
    ),
    Row(
        "EXPIRED from FAILED_RETRYABLE (never ended): a new operation",
        row(KeyStatus.EXPIRED, expired_from=KeyStatus.FAILED_RETRYABLE),
        Execute(1),
    ),
    Row(
        "COMPLETED past its TTL, not yet marked: replayed",
        row(KeyStatus.COMPLETED, expires_at_ms=NOW - 1),
        Replay(RESPONSE, KeyStatus.COMPLETED),
    ),
    Row(
        "COMPLETED past its TTL, another request: a new operation",
        row(KeyStatus.COMPLETED, expires_at_ms=NOW - 1),
        Execute(1),
        request_hash="sha256:" + "2" * 64,
    ),
    Row("FAILED_RETRYABLE past its TTL", row(KeyStatus.FAILED_RETRYABLE, attempt=3, expires_at_ms=NOW - 1), Execute(1)),
]


@pytest.mark.parametrize("case", TABLE, ids=[r.id for r in TABLE])
def test_plan(case: Row) -> None:
    got = plan(
        case.row,
        request_hash=case.request_hash,
        call_id=case.call_id,
        owner=ME,
        now_ms=NOW,
        max_attempts=case.max_attempts,
        resend_safe=case.resend_safe,
    )
    assert got == case.expected


def test_conflict_retry_after_is_the_lease_left() -> None:
    got = plan(
        row(KeyStatus.PENDING, call_id="call_0", lease_owner=OTHER, lease_until_ms=NOW + 7_250),
        request_hash=HASH,
        call_id="call_1",
        owner=ME,
        now_ms=NOW,
        max_attempts=3,
        resend_safe=False,
    )
    assert isinstance(got, Conflict) and got.retry_after_ms == 7_250


def test_docstring_rows_are_covered() -> None:
    ids = " ".join(r.id for r in TABLE)
    for phrase in (
        "no record",
        "hash mismatch",
        KeyStatus.COMPLETED,
        KeyStatus.FAILED_FINAL,
        KeyStatus.COMPENSATED,
        "own lease",
        "redrive",
        "resend-safe",
        "same call leased",
        "other call leased",
        "attempts left",
        "none left",
        KeyStatus.EXPIRED,
        "tombstone",
        "never ended",
        "another request",
    ):
        assert phrase in ids


@pytest.mark.parametrize("status", [KeyStatus.EXPIRED, KeyStatus.COMPLETED])
def test_an_expired_key_is_refused_when_the_contract_says_reject(status: str) -> None:
    expired = row(status, expires_at_ms=NOW - 1)
    kwargs: dict[str, Any] = {
        "request_hash": HASH,
        "call_id": "call_1",
        "owner": ME,
        "now_ms": NOW,
        "max_attempts": 3,
        "resend_safe": True,
    }
    assert plan(expired, reject_expired=True, **kwargs) == Expired()
    assert plan(replace(expired, expired_from=KeyStatus.COMPLETED), reject_expired=True, **kwargs) == Expired()
    if status == KeyStatus.COMPLETED:  # within its window, a completed key replays
        assert plan(row(status), reject_expired=True, **kwargs) != Expired()
