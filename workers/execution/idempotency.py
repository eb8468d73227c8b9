"""The seeds' idempotency state model: what a call may do given the record of its key.

Pure: the existing row (read under SELECT ... FOR UPDATE), the call and the time come in; one
of a closed set of plans comes out. The worker applies it inside the reservation
transaction, so the database, not this function, is the boundary of truth.

    no record                      -> Execute (reserve PENDING)
    request hash differs           -> Mismatch (SIGNATURE_MISMATCH, fail closed)
    COMPLETED / FAILED_FINAL       -> Replay the stored outcome (idempotency_hit)
    COMPENSATED                    -> Replay, saying the effect was compensated
    PENDING, our own lease         -> Execute (we are retrying our own round)
    PENDING, handed to a re-drive  -> Execute (reconciliation found no effect and re-drove it)
    PENDING, lease expired, safe   -> Execute (take over; the effect is idempotent by key)
    PENDING, same call, leased     -> Hold (its owner or reconciliation will answer)
    PENDING, another call, leased  -> Conflict (IDEMPOTENCY_CONFLICT, retry after the lease)
    FAILED_RETRYABLE, retries left -> Execute (attempt + 1)
    FAILED_RETRYABLE, none left    -> Replay the failure as final

A key past its deduplication window (EXPIRED, or not yet marked so) never lets an operation
that ended run again, however old the key; what a new call under it gets:

    contract says `expired_key: reject`                    -> Expired (refused: the agent must
                                                              name a new logical operation)
    its operation ended (COMPLETED / FAILED_FINAL /
      COMPENSATED), the same request, outcome kept          -> Replay the stored outcome
    its operation ended, the same request, only a
      tombstone left (retention stripped the outcome)       -> Expired
    another request, or its operation never ended           -> Execute as a new operation
      (FAILED_RETRYABLE)

A record replayed after its key expired (a captured batch, an old dead letter) is therefore
answered from the ledger or refused, never executed: the stage MAC proves who wrote a record,
not when, so this holds even for one that passed freshness (workers/runtime/freshness.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from toolgate.states import ENDED as ENDED  # recording reads it from here
from toolgate.states import KeyStatus
from toolgate.store.rows import KeyRow as KeyRow  # the row a plan reads

# The lease owner reconciliation writes when it re-drives a key: whichever execution worker
# receives the re-driven call takes the key over.
REDRIVE_OWNER = "reconciliation:redrive"


@dataclass(frozen=True)
class Execute:
    attempt: int
    takeover: bool = False


@dataclass(frozen=True)
class Replay:
    response: dict[str, Any]
    status: KeyStatus


@dataclass(frozen=True)
class Hold:
    pass


@dataclass(frozen=True)
class Conflict:
    retry_after_ms: int


@dataclass(frozen=True)
class Mismatch:
    pass


@dataclass(frozen=True)
class Expired:
    pass


Plan = Execute | Replay | Hold | Conflict | Mismatch | Expired


def plan(
    row: KeyRow | None,
    *,
    request_hash: str,
    call_id: str,
    owner: str,
    now_ms: int,
    max_attempts: int,
    resend_safe: bool,
    reject_expired: bool = False,
) -> Plan:
    if row is None:
        return Execute(1)
    if row.status == KeyStatus.EXPIRED or (row.expires_at_ms < now_ms and row.status != KeyStatus.PENDING):
        return _expired(row, request_hash, reject_expired)
    if row.request_hash != request_hash:
        return Mismatch()
    if row.status in ENDED:
        return Replay(row.response or {}, row.status)
    if row.status == KeyStatus.FAILED_RETRYABLE:
        if row.attempt < max_attempts:
            return Execute(row.attempt + 1)
        return Replay(row.response or {}, KeyStatus.FAILED_FINAL)
    # PENDING
    if row.lease_owner == owner:
        return Execute(row.attempt)
    if row.lease_owner == REDRIVE_OWNER:
        return Execute(row.attempt, takeover=True)
    lease_left = (row.lease_until_ms or 0) - now_ms
    if lease_left <= 0 and resend_safe:
        return Execute(row.attempt, takeover=True)
    if row.call_id == call_id:
        return Hold()
    return Conflict(max(lease_left, 1000))


def _expired(row: KeyRow, request_hash: str, reject: bool) -> Plan:
    """A key past its deduplication window (the second table of the module docstring)."""
    if reject:
        return Expired()
    ended = row.expired_from if row.status == KeyStatus.EXPIRED else row.status
    if ended in ENDED and row.request_hash == request_hash:
        return Expired() if row.response is None else Replay(row.response, ended)
    return Execute(1)
