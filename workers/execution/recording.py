"""The recording step (Ran -> Recorded, machine.py): one transaction records how every call ended.

Pure: it asks (asks.py) for what it reads, runs and writes, and decides with decision.py. It
re-reads approved targets under FOR UPDATE, within the calls' time left (STALE_STATE if they
moved since approval; STALE_STATE lock_timeout, retryable, if another transaction held one past
half of it: bounds.py) and consumes their tickets (TargetState, ConsumeTickets), runs the
Postgres effects (RunPostgres: all at once; with a savepoint each only when one was refused, in
a second try of the transaction) and the after_effects of the external ones (RunAfterEffects),
and writes (Write), for every call: its key's status (COMPLETED / FAILED / still PENDING; a new key of a round that
reserved in this same transaction is inserted with it), its result as an outbox row, the
earlier call a compensation undid (or the dead letter of one that failed), the quarantine of a
READ_ONLY tool version whose statement tried to write (bounds.py), and the audit entries. A
co-located effect therefore commits with its COMPLETED record and outbox row or not at all.

The results' rows are inserted held (store/outbox.py): execution publishes them itself
once the transaction committed, a hop shorter than waking the relay; the relay takes them only
if execution dies before they are acknowledged.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from toolgate.schemas.codec import codec
from toolgate.schemas.hashing import fingerprint, usage_events
from toolgate.schemas.models import ExecutionResult, TaxonomyClass
from toolgate.states import KeyStatus
from toolgate.store.audit_entry import Entry
from toolgate.topics.headers import Address
from toolgate.workers.execution import answers, bounds, clearance, decision, keys, reads
from toolgate.workers.execution import idempotency as idem
from toolgate.workers.execution.answers import STAGE
from toolgate.workers.execution.asks import RunAfterEffects, RunPostgres, Step, TargetState, Write, Written, ask
from toolgate.workers.execution.effects import Done, Effect, failed
from toolgate.workers.execution.reservation import consumed_elsewhere, unconsumed
from toolgate.workers.execution.writes import Quarantined, Writes
from toolgate.workers.runtime import deadletters

if TYPE_CHECKING:
    from toolgate.workers.execution.machine import Calls, CallState, Ended


def record(calls: Calls, now: int, *, careful: bool) -> Step[tuple[tuple[Ended, ...], Written]]:
    """Everything of the recording inside one transaction: each call's result and key status,
    which take effect only once the transaction committed, and the driver's answer to Write.
    Not `careful`, a Postgres effect refused makes the driver raise (executors.Refused)."""
    local = yield from _local_effects(calls, [i for i, c in enumerate(calls) if c.runs and c.call.in_postgres], careful)
    after_failed = yield from _after_effects(calls)
    writes = Writes()
    by_call: dict[int, ExecutionResult] = {}
    ended: list[Ended] = []
    for i, c in enumerate(calls):
        res: ExecutionResult | None = c.result
        status: KeyStatus | None = None
        if c.runs:
            res, status = _conclude(replace(c, effect=local.get(i, c.effect)), after_failed.get(i), writes, now)
        elif res is None and c.leader is not None and c.leader in by_call and not isinstance(c.plan, idem.Mismatch):
            res = answers.replay(c.record, c.traceparent, answers.stored_response(by_call[c.leader]), now)
        if isinstance(c.plan, idem.Replay) and c.plan.status is KeyStatus.FAILED_FINAL:
            writes.released += usage_events(c.record.call)  # its retries spent: ended, as if it ran out now
        ended.append((res, status))
        if res is not None:
            by_call[i] = res
            _publish(c, res, status, writes)
    written = yield from ask(Write(writes))
    return tuple(ended), written


def _conclude(c: CallState, after_error: str | None, writes: Writes, now: int) -> tuple[ExecutionResult, KeyStatus]:
    """A call whose effect ran this round: its result, its compensation's bookkeeping, its key."""
    concluded = decision.conclude(c.call.job, c.traceparent, c.plan, c.original is not None, c.effect, now)
    res, status = concluded.result, concluded.status
    if after_error is not None:
        res = decision.after_effect_failed(res, after_error)
    if c.original is not None:
        _compensation(c, decision.compensation_after(status), writes, now)
    if c.unwritten:
        writes.insert.append(keys.settled_row(c.call, res, status))
    elif c.call.key is not None:
        writes.settle.append(keys.settlement(c.record.call.tenant_id, c.call.key, res, status))
    if c.ticket is not None and status in idem.ENDED:
        writes.spent.append(c.ticket.approval_id)
    if status is KeyStatus.FAILED_FINAL:  # it never runs again: what it reserved of its value budgets is freed
        writes.released += usage_events(c.record.call)
    if c.call.key is None and status is not KeyStatus.PENDING:
        writes.reads.append(reads.outcome_row(c.record, res))
    if bounds.violated(c.effect):
        _quarantine(c, writes)
    return res, status


def _quarantine(c: CallState, writes: Writes) -> None:
    """A READ_ONLY tool's statement tried to write (bounds.py): its version is quarantined in this
    transaction, and the audit log says why and which call tripped it."""
    r = c.record.call
    reason = "declared READ_ONLY, but its statement tried to write (SQLSTATE 25006, refused read-only)"
    writes.quarantine.append(Quarantined(r.tool_name, r.tool_version, reason, r.call_id, r.tenant_id))
    detail = {"tool": r.tool_name, "version": r.tool_version, "reason": reason}
    writes.entries.append(Entry(STAGE, "tool_quarantined", STAGE, r.call_id, r.tenant_id, detail))


def _compensation(c: CallState, after: decision.Undone | decision.NotUndone | None, writes: Writes, now: int) -> None:
    """The earlier call a compensation undid becomes COMPENSATED; one it failed to undo is
    marked COMPENSATION_FAILED and the compensation's request dead-lettered for an operator."""
    original, r = c.original, c.record
    assert original is not None
    if isinstance(after, decision.Undone):
        writes.compensated.append((c.call.key, original.tenant_id, original.key))
        writes.released += original.events  # undone: its value is spent no more
    elif isinstance(after, decision.NotUndone):
        writes.compensation_failed.append((original.tenant_id, original.key))
        letter = deadletters.for_request(
            r,
            codec().encode(r),
            stage=STAGE,
            taxonomy=TaxonomyClass.COMPENSATION_FAILED,
            now_ms=now,
            reason=f"compensation of {r.call.compensation_of} failed",
        )
        writes.letters.append((letter, Address.of(r.call, c.traceparent, key=r.call.call_id)))


def _publish(c: CallState, res: ExecutionResult, status: KeyStatus | None, writes: Writes) -> None:
    """The call's result as an outbox row, and its audit entry when it is audited."""
    r = c.record
    writes.results.append((r.call.home_partition, res))
    if not decision.audited(c.call.job.contract, res, status):
        return
    detail = {
        "tool": r.call.tool_name,
        "version": r.call.tool_version,
        "key": fingerprint(c.call.key) if c.call.key else None,
        "taxonomy": str(res.outcome.taxonomy_class),
        "status": status,
        "idempotency_hit": res.idempotency_hit,
        "approval_id": r.approval_id,
    }
    action = decision.action(res, status)
    writes.entries.append(Entry(STAGE, action, r.call.principal.user_id, r.call.call_id, r.call.tenant_id, detail))


def _local_effects(calls: Calls, local: list[int], careful: bool) -> Step[dict[int, Effect]]:
    """Run the Postgres effects in the recording transaction; an approved one only while its
    target, locked now, is still in the state the approver saw, consuming its ticket here."""
    bound = [i for i in local if (t := calls[i].ticket) is not None and t.state_version is not None]
    effects: dict[int, Effect] = {}
    if bound:
        versions = yield from ask(TargetState(tuple(calls[i].call.job for i in bound), True))
        for i, version in zip(bound, versions, strict=True):
            if isinstance(version, bounds.Cut):  # held elsewhere past half the call's time left
                effects[i] = bounds.read_cut(calls[i].call.job, version)
                continue
            moved = clearance.stale(calls[i].ticket, version)
            if moved is not None:
                effects[i] = failed(moved.taxonomy, moved.code, moved.reason, final=True)
    for i in (yield from unconsumed(calls, [i for i in local if i not in effects])):
        effects[i] = consumed_elsewhere(calls[i])
    run = [i for i in local if i not in effects]
    if run:
        ran = yield from ask(RunPostgres(tuple(calls[i].call.job for i in run), careful))
        effects.update(zip(run, ran, strict=True))
    return effects


def _after_effects(calls: Calls) -> Step[dict[int, str]]:
    """The binding's after_effect of each external effect that completed now, in the
    transaction that records it: which failed, and why."""
    done = [
        (i, c.call.job, c.effect.data)
        for i, c in enumerate(calls)
        if c.runs and isinstance(c.effect, Done) and "after_effect" in c.call.job.contract.binding
    ]
    if not done:
        return {}
    errors = yield from ask(RunAfterEffects(tuple((job, data) for _, job, data in done)))
    return {i: error for (i, _, _), error in zip(done, errors, strict=True) if error is not None}
