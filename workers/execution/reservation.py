"""The reservation step (Prepared -> Reserved, machine.py): the transaction before any effect
outside Postgres.

Pure: it asks (asks.py) for what it reads and writes, in this order, and decides with
decision.py, clearance.py, compensation.py and idempotency.py:
  1. late mutations are answered from their stored outcomes (ReadOutcomes);
  2. a read that already has a first outcome is answered from it (ReadFirstOutcomes, reads.py);
  3. calls that need approvals are checked against their tickets, read under FOR UPDATE
     (LoadTickets); the others are refused before any key is reserved;
  4. the earlier calls compensations undo are locked and checked (LoadOriginals);
  5. keys are reserved PENDING and the existing ones locked (ReserveKeys, LockKeys; deferred:
     only locked, a new key is inserted with its end), each is planned (idempotency.plan), and
     a key that runs again is re-driven (RedriveKeys);
  6. an approved effect outside Postgres checks its target's state and consumes its ticket
     here, the last transaction before it (TargetState, ConsumeTickets);
  7. what runs no effect is answered (replays, conflicts; decision.after_reservation).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from toolgate.contracts.registry import Registry
from toolgate.workers.execution import answers, bounds, clearance, compensation, decision, keys, reads
from toolgate.workers.execution import idempotency as idem
from toolgate.workers.execution.asks import (
    ConsumeTickets,
    Ident,
    LoadOriginals,
    LoadTickets,
    LockKeys,
    ReadFirstOutcomes,
    ReadOutcomes,
    RedriveKeys,
    ReserveKeys,
    Step,
    TargetState,
    ask,
)
from toolgate.workers.execution.effects import Failed, failed

if TYPE_CHECKING:
    from toolgate.workers.execution.machine import Calls, CallState, Lease


def reserve(calls: list[CallState], now: int, lease: Lease, registry: Registry, *, deferred: bool) -> Step[Calls]:
    """The reservation's asks and decisions, in order (the module docstring)."""
    yield from _settle_late(calls, now)
    yield from _replay_copies(calls, now)
    yield from _clear(calls, now)
    keyed = [i for i, c in enumerate(calls) if c.result is None and c.call.key is not None]
    yield from _reserve_keys(calls, keyed, now, lease, registry, deferred)
    yield from bind_remote(calls)
    for i in keyed:
        calls[i] = _settle_without_effect(calls, i, now)
    return tuple(calls)


def _settle_late(calls: list[CallState], now: int) -> Step[None]:
    """A mutation past its deadline runs nothing and reserves nothing. But an operation that
    already has an outcome gets that outcome again, as any repeat does (a re-published or
    re-driven call may arrive late)."""
    late = [i for i, c in enumerate(calls) if c.late]
    if not late:
        return
    stored = yield from ask(
        ReadOutcomes(tuple((calls[i].record.call.tenant_id, calls[i].call.key or "") for i in late))
    )
    for i in late:
        c = calls[i]
        found = stored.get((c.record.call.tenant_id, c.call.key or ""))
        calls[i] = replace(c, result=decision.late_answer(c.record, c.traceparent, found, now))


def _replay_copies(calls: list[CallState], now: int) -> Step[None]:
    """Answer each read that already has a first outcome from it."""
    pending = [i for i, c in enumerate(calls) if c.result is None and c.call.key is None and not c.late]
    if not pending:
        return
    idents = tuple((calls[i].record.call.tenant_id, calls[i].record.call.call_id) for i in pending)
    stored = yield from ask(ReadFirstOutcomes(idents))
    for i in pending:
        calls[i] = replace(calls[i], result=reads.answered(calls[i].record, calls[i].traceparent, stored, now))


def _clear(calls: list[CallState], now: int) -> Step[None]:
    """Calls that need approvals run only under an APPROVED ticket for exactly them (read
    under FOR UPDATE); the others are refused before any key is reserved."""
    held = [
        i
        for i, c in enumerate(calls)
        if c.result is None and not c.late and clearance.approvals_needed(c.record, c.call.job.contract)
    ]
    if not held:
        return
    found = yield from ask(LoadTickets(tuple(clearance.ticket_id(calls[i].record) for i in held)))
    for i in held:
        c = calls[i]
        ticket = found.get(clearance.ticket_id(c.record))
        verdict = clearance.clear(c.record, c.call.job.contract, c.call.operation, ticket)
        if isinstance(verdict, clearance.Blocked):
            refusal = answers.refuse(c.record, c.traceparent, verdict, now)
            calls[i] = replace(c, result=refusal)
        else:
            calls[i] = replace(c, ticket=verdict.ticket)


def _reserve_keys(
    calls: list[CallState], keyed: list[int], now: int, lease: Lease, registry: Registry, deferred: bool
) -> Step[None]:
    """Reserve keys, lock the existing ones, plan each; a key that runs again is re-driven.
    `deferred`: the round records in this same transaction, so a new key is not inserted now
    but once, with its end (keys.py); the call is marked `unwritten`."""
    if not keyed:
        return
    yield from _check_compensations(calls, keyed, now, registry)
    first = _leaders(calls, keyed)
    if not first:
        return
    # A call under a spent ticket reserves nothing: it may only replay what its operation stored.
    spent = {ident for ident, i in first.items() if (t := calls[i].ticket) is not None and t.spent}
    if deferred:
        existing = yield from ask(LockKeys(tuple(first)))
        fresh = {ident for ident in first if ident not in existing and ident not in spent}
        for ident in fresh:
            calls[first[ident]] = replace(calls[first[ident]], unwritten=True)
    else:
        rows = tuple(keys.reservation(calls[i].call) for ident, i in first.items() if ident not in spent)
        fresh = yield from ask(ReserveKeys(rows, lease_for(lease, [calls[i] for i in first.values()], now)))
        # A fresh key's row is this transaction's own insert, locked already and known: only the
        # keys that existed before are read, under FOR UPDATE (usually none: one statement saved).
        old = tuple(ident for ident in first if ident not in fresh)
        existing = (yield from ask(LockKeys(old))) if old else {}
    redrive = []
    for ident, i in first.items():
        c = calls[i]
        row = None if ident in fresh else existing.get(ident)
        plan = idem.plan(
            row,
            request_hash=c.record.call.request_hash,
            call_id=c.record.call.call_id,
            owner=lease.owner,
            now_ms=now,
            max_attempts=c.call.job.contract.max_retries + 1,
            resend_safe=decision.resend_safe(c.call.job.contract),
            reject_expired=c.call.job.contract.binding.get("expired_key") == "reject",
        )
        c = calls[i] = replace(c, plan=plan)
        blocked = clearance.spent(c.ticket, plan)
        if blocked is not None:
            refusal = answers.refuse(c.record, c.traceparent, blocked, now)
            calls[i] = replace(c, result=refusal)
        elif isinstance(plan, idem.Execute) and row is not None:
            redrive.append(keys.redrive_row(c.call, plan.attempt))
    if redrive:
        yield from ask(RedriveKeys(tuple(redrive), lease_for(lease, [calls[i] for i in first.values()], now)))


# How long a key stays leased past the deadline of its effect: the effect ends by its deadline
# (every attempt and retry is bounded by it, retry.py), then its end is recorded.
LEASE_MARGIN_S = 2.0


def lease_for(lease: Lease, calls: list[CallState], now: int) -> float:
    """How long this round's keys are leased: the worker's lease, or, when an effect may run
    longer, until the latest deadline and a margin. A key whose lease ran out while its effect
    still ran would be taken over by reconciliation (run again or answered twice)."""
    latest = max((c.call.job.deadline_ms for c in calls), default=now)
    return max(lease.seconds, (latest - now) / 1000 + LEASE_MARGIN_S)


def _leaders(calls: list[CallState], keyed: list[int]) -> dict[Ident, int]:
    """The first unanswered call of each key; a later one follows it (its `leader`)."""
    first: dict[Ident, int] = {}
    for i in keyed:
        c = calls[i]
        if c.result is not None:
            continue
        ident = (c.record.call.tenant_id, c.call.key or "")
        if ident in first:
            calls[i] = replace(c, leader=first[ident])
        else:
            first[ident] = i
    return first


def _check_compensations(calls: list[CallState], keyed: list[int], now: int, registry: Registry) -> Step[None]:
    """Lock the earlier calls that compensations undo, and refuse those that may not run."""
    compensating = [i for i in keyed if calls[i].record.call.compensation_of]
    if not compensating:
        return
    originals = yield from ask(LoadOriginals(tuple(calls[i].record for i in compensating)))
    for i in compensating:
        c = calls[i]
        original = originals.get((c.record.call.tenant_id, c.record.call.compensation_of or ""))
        c = calls[i] = replace(c, original=original)
        refusal = compensation.check(c.record, c.call.key or "", original, registry)
        if refusal is not None:
            taxonomy, error = refusal
            calls[i] = replace(c, result=answers.refuse_compensation(c.record, c.traceparent, taxonomy, error, now))


def bind_remote(calls: list[CallState]) -> Step[None]:
    """An approved effect outside Postgres that is about to run (not a replay: its own
    effect may be what changed its target) needs its target as the approver saw it, read
    now since no lock can span the effect, and consumes its ticket here, in the last
    transaction before it. What may not run fails like an effect, settling its key.
    (A Postgres effect does both in its own transaction: recording.py.)"""
    remote = [i for i, c in enumerate(calls) if c.runs and not c.call.in_postgres and c.ticket is not None]
    if not remote:
        return
    versions = yield from ask(TargetState(tuple(calls[i].call.job for i in remote), False))
    for i, version in zip(remote, versions, strict=True):
        if isinstance(version, bounds.Cut):
            calls[i] = replace(calls[i], effect=bounds.read_cut(calls[i].call.job, version))
            continue
        moved = clearance.stale(calls[i].ticket, version)
        if moved is not None:
            calls[i] = replace(calls[i], effect=failed(moved.taxonomy, moved.code, moved.reason, final=True))
    for i in (yield from unconsumed(calls, [i for i in remote if calls[i].effect is None])):
        calls[i] = replace(calls[i], effect=consumed_elsewhere(calls[i]))


def unconsumed(calls: list[CallState] | Calls, indices: list[int]) -> Step[list[int]]:
    """Consume the tickets these approved calls run under; those another operation consumed
    meanwhile may not run."""
    approved = {t.approval_id: i for i in indices if (t := calls[i].ticket) is not None}
    if not approved:
        return []
    consumed = yield from ask(ConsumeTickets({ticket: calls[i].call.operation for ticket, i in approved.items()}))
    return [i for ticket, i in approved.items() if ticket not in consumed]


def consumed_elsewhere(c: CallState) -> Failed:
    """The effect of a call whose ticket released another operation meanwhile: it fails, final."""
    blocked = clearance.consumed_elsewhere(c.ticket)
    return failed(blocked.taxonomy, blocked.code, blocked.reason, final=True)


def _settle_without_effect(calls: list[CallState], i: int, now: int) -> CallState:
    """After the reservation: answer what runs no effect (replays, conflicts)."""
    c = calls[i]
    if c.result is not None:
        return c
    if c.leader is not None:
        leader = calls[c.leader]
        c = replace(c, plan=decision.follower_plan(leader.record, leader.plan, c.record))
    if c.plan is None:
        return c
    settled = decision.after_reservation(c.record, c.traceparent, c.plan, now)
    return replace(c, result=settled.result) if isinstance(settled, decision.Answer) else c
