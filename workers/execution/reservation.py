"""Phase A of an execution round: the one transaction before any effect outside Postgres.

It answers late mutations from their stored outcomes, checks the approval tickets of calls that
need them (under FOR UPDATE), locks the earlier calls that compensations undo, reserves
PENDING keys and locks the existing ones, and plans each key (idempotency.plan). An approved
effect outside Postgres then checks its target's state and consumes its ticket here, in the
last transaction before it. The decisions are decision.py's; this module reads and writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection

from toolgate.contracts.registry import Registry
from toolgate.hashing import request_hash
from toolgate.store import keys as idempotency_keys
from toolgate.workers.execution import answers, clearance, compensation, decision, keys, tickets
from toolgate.workers.execution import idempotency as idem
from toolgate.workers.execution.attempt import Attempt
from toolgate.workers.execution.effects import Effect
from toolgate.workers.execution.executors import failed


@dataclass(frozen=True)
class Lease:
    """Who reserves keys, and for how long before another worker may take one over."""

    owner: str
    seconds: float


async def settle_late(conn: AsyncConnection[Any], late: list[Attempt], now: int) -> None:
    """A mutation past its deadline runs nothing and reserves nothing. But an operation that
    already has an outcome gets that outcome again, as any repeat does (a re-published or
    re-driven call may arrive late)."""
    if not late:
        return
    stored = await keys.outcomes(conn, [(a.record.tenant_id, a.key or "") for a in late])
    for a in late:
        a.result = decision.late_answer(a.record, a.traceparent, stored.get((a.record.tenant_id, a.key or "")), now)


async def clear(conn: AsyncConnection[Any], held: list[Attempt], now: int) -> None:
    """Calls that need approvals run only under an APPROVED ticket for exactly them (read
    under FOR UPDATE); the others are refused before any key is reserved."""
    if not held:
        return
    found = await tickets.load(conn, [clearance.ticket_id(a.record) for a in held])
    for a in held:
        verdict = clearance.clear(a.record, a.job.contract, a.operation, found.get(clearance.ticket_id(a.record)))
        if isinstance(verdict, clearance.Blocked):
            a.result = answers.refuse(a.record, a.traceparent, verdict.taxonomy, verdict.code, verdict.message, now)
        else:
            a.ticket = verdict.ticket


async def reserve(
    conn: AsyncConnection[Any], keyed: list[Attempt], now: int, lease: Lease, registry: Registry, *, deferred: bool
) -> None:
    """Reserve keys, lock the existing ones, plan each; a key that runs again is re-driven.
    `deferred`: the round records in this same transaction, so a new key is not inserted now
    but once, with its end (keys.py); the attempt is marked `unwritten`."""
    if not keyed:
        return
    await _check_compensations(conn, keyed, now, registry)
    first = _leaders(keyed)
    if not first:
        return
    # A call under a spent ticket reserves nothing: it may only replay what its operation stored.
    spent = {ident for ident, a in first.items() if a.ticket is not None and a.ticket.spent}
    if deferred:
        existing = await keys.lock(conn, list(first))
        fresh = {ident for ident in first if ident not in existing and ident not in spent}
        for ident in fresh:
            first[ident].unwritten = True
    else:
        fresh = await keys.reserve(conn, [a for i, a in first.items() if i not in spent], lease.owner, lease.seconds)
        # A fresh key's row is this transaction's own insert, locked already and known: only the
        # keys that existed before are read, under FOR UPDATE (usually none: one statement saved).
        old = [ident for ident in first if ident not in fresh]
        existing = await keys.lock(conn, old) if old else {}
    redrive = []
    for ident, a in first.items():
        row = None if ident in fresh else existing.get(ident)
        a.plan = idem.plan(
            row,
            request_hash=request_hash(a.record),
            call_id=a.record.call_id,
            owner=lease.owner,
            now_ms=now,
            max_attempts=a.job.contract.max_retries + 1,
            resend_safe=decision.resend_safe(a.job.contract),
            reject_expired=a.job.contract.binding.get("expired_key") == "reject",
        )
        blocked = clearance.spent(a.ticket, a.plan)
        if blocked is not None:
            a.result = answers.refuse(a.record, a.traceparent, blocked.taxonomy, blocked.code, blocked.message, now)
        elif isinstance(a.plan, idem.Execute) and row is not None:
            redrive.append(keys.redrive_row(a, a.plan.attempt))
    await idempotency_keys.redrive(conn, redrive, lease.owner, lease.seconds)


def _leaders(keyed: list[Attempt]) -> dict[idempotency_keys.Ident, Attempt]:
    """The first unanswered call of each key; a later one follows it (its `leader`)."""
    first: dict[idempotency_keys.Ident, Attempt] = {}
    for a in keyed:
        if a.result is not None:
            continue
        ident = (a.record.tenant_id, a.key or "")
        if ident in first:
            a.leader = first[ident]
        else:
            first[ident] = a
    return first


async def _check_compensations(conn: AsyncConnection[Any], keyed: list[Attempt], now: int, registry: Registry) -> None:
    """Lock the earlier calls that compensations undo, and refuse those that may not run."""
    compensating = [a for a in keyed if a.record.compensation_of]
    originals = await compensation.load(conn, [a.record for a in compensating])
    for a in compensating:
        a.original = originals.get((a.record.tenant_id, a.record.compensation_of or ""))
        refusal = compensation.check(a.record, a.key or "", a.original, registry)
        if refusal is not None:
            taxonomy, error = refusal
            a.result = answers.refuse_compensation(a.record, a.traceparent, taxonomy, error, now)


async def bind_remote(conn: AsyncConnection[Any], attempts: list[Attempt]) -> None:
    """An approved effect outside Postgres that is about to run (not a replay: its own
    effect may be what changed its target) needs its target as the approver saw it, read
    now since no lock can span the effect, and consumes its ticket here, in the last
    transaction before it. What may not run fails like an effect, settling its key.
    (A Postgres effect does both in its own transaction, phase B.)"""
    remote = [a for a in attempts if a.runs and not a.in_postgres and a.ticket is not None]
    versions = await tickets.state_now(conn, [(a.record, a.job.contract) for a in remote], for_update=False)
    for a, version in zip(remote, versions, strict=True):
        moved = clearance.stale(a.ticket, version)
        if moved is not None:
            a.effect = failed(moved.taxonomy, moved.code, moved.message, final=True)
    for a in await unconsumed(conn, [a for a in remote if a.effect is None]):
        a.effect = consumed_elsewhere(a)


async def unconsumed(conn: AsyncConnection[Any], attempts: list[Attempt]) -> list[Attempt]:
    """Consume the tickets these approved attempts run under; those another operation
    consumed meanwhile may not run."""
    approved = {a.ticket.approval_id: a for a in attempts if a.ticket is not None}
    consumed = await tickets.consume(conn, {ticket: a.operation for ticket, a in approved.items()})
    return [a for ticket, a in approved.items() if ticket not in consumed]


def consumed_elsewhere(a: Attempt) -> Effect:
    """The effect of a call whose ticket released another operation meanwhile: it fails, final."""
    blocked = clearance.consumed_elsewhere(a.ticket)
    return failed(blocked.taxonomy, blocked.code, blocked.message, final=True)
