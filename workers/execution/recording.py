"""Phase B of an execution round: one transaction records how every call ended.

It re-reads approved targets under FOR UPDATE (STALE_STATE if they moved since approval) and
consumes their tickets, runs the Postgres effects (all at once; with a savepoint each only when
one was refused, in a second try of the transaction) and the after_effects of the external
ones, and writes, for every call: its key's status (COMPLETED / FAILED / still PENDING; a new
key of a round that reserved in this same transaction is inserted with it), its result as an
outbox row, the earlier call a compensation undid (or the dead letter of one that failed), and
the audit entries. A co-located effect therefore commits with its COMPLETED record and outbox
row or not at all. The decisions are decision.py's.

The results' rows are inserted held (store/outbox.py): execution publishes them itself
once the transaction committed, a hop shorter than waking the relay; the relay takes them only
if execution dies before they are acknowledged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from psycopg import AsyncConnection

from toolgate.hashing import fingerprint
from toolgate.schemas.codec import codec
from toolgate.schemas.models import ExecutionResult, TaxonomyClass
from toolgate.states import KeyStatus
from toolgate.store import approvals, audit, batch
from toolgate.store import keys as idempotency_keys
from toolgate.store import reads as read_outcomes
from toolgate.store.outbox import OutboxRow, enqueue, enqueue_held, held_ids
from toolgate.topics.catalog import Topics
from toolgate.workers.execution import answers, clearance, compensation, decision, keys, reads, tickets
from toolgate.workers.execution import idempotency as idem
from toolgate.workers.execution.answers import STAGE
from toolgate.workers.execution.attempt import Attempt
from toolgate.workers.execution.effects import Done, Effect
from toolgate.workers.execution.executors import failed, run_after_effects, run_postgres_batch
from toolgate.workers.execution.reservation import Lease, consumed_elsewhere, unconsumed
from toolgate.workers.runtime import deadletters, outbox

Ended = tuple[ExecutionResult | None, KeyStatus | None]  # a call's result and its key's status


@dataclass(frozen=True)
class Recorded:
    """How each call ended, the results' outbox rows for execution to publish itself, and the
    audit chain's append, which `commit` runs with COMMIT."""

    ended: list[Ended]
    held: outbox.Held
    audit: batch.Statement | None = None


async def begin(conn: AsyncConnection[Any]) -> None:
    """Open the round's transaction on a connection in autocommit mode (`batch.transaction`
    rolls back what a failure leaves open): its end is `commit`'s."""
    await batch.run(conn, [batch.BEGIN])


async def commit(conn: AsyncConnection[Any], recorded: Recorded) -> None:
    """Append the round's audit entries and commit, in one round trip."""
    await batch.run(conn, [recorded.audit, batch.COMMIT] if recorded.audit is not None else [batch.COMMIT])


@dataclass
class Writes:
    """What the recording transaction writes, gathered call by call, written in one go."""

    settle: list[dict[str, Any]] = field(default_factory=list)
    insert: list[dict[str, Any]] = field(default_factory=list)  # new keys, with their end
    rows: list[OutboxRow] = field(default_factory=list)
    results: list[OutboxRow] = field(default_factory=list)  # inserted held
    entries: list[audit.Entry] = field(default_factory=list)
    compensated: list[tuple[str | None, str, str]] = field(default_factory=list)
    compensation_failed: list[tuple[str, str]] = field(default_factory=list)
    spent: list[str] = field(default_factory=list)  # tickets whose operation ended
    reads: list[tuple[str, str, str, str]] = field(default_factory=list)  # reads' first outcomes

    async def write(
        self, conn: AsyncConnection[Any], topics: Topics, lease: Lease
    ) -> tuple[outbox.Held, batch.Statement | None]:
        """The writes, and the audit chain's append for `commit` to run with COMMIT.

        Pipelined: these writes need no answer but the keys inserted, the held rows' ids and the
        audit chain's tail, so they go out with the chain's lock and the read of its tail, one
        round trip for all (the server runs them in order, in this transaction). A new key taken
        meanwhile raises `keys.KeyTaken`."""
        held = tail = None
        async with conn.pipeline():
            inserted = await idempotency_keys.insert_settled(conn, self.insert, lease.owner, lease.seconds)
            await idempotency_keys.settle(conn, self.settle, lease.seconds)
            await idempotency_keys.mark_compensated(conn, self.compensated)
            await idempotency_keys.mark_compensation_failed(conn, self.compensation_failed)
            if self.spent:
                await approvals.spend(conn, self.spent)
            await read_outcomes.store(conn, self.reads)
            await enqueue(conn, self.rows, topics)
            if self.results:
                held = await enqueue_held(conn, self.results, topics)
            if self.entries:
                tail = await audit.tail(conn)
        await keys.taken(inserted, self.insert)
        ids = await held_ids(held) if held is not None else []
        rows = audit.rows_statement(await tail.fetchone(), self.entries) if tail is not None else None
        return outbox.Held(ids, self.results), rows


async def record_once(
    conn: AsyncConnection[Any], attempts: list[Attempt], topics: Topics, lease: Lease, now: int, careful: bool
) -> Recorded:
    """Everything of phase B inside one transaction; returns each call's result and key
    status, which take effect only once the transaction committed, and the rows to publish then.
    Not `careful`, a Postgres effect refused raises `Refused` (executors.run_postgres_batch)."""
    local = await local_effects(conn, [a for a in attempts if a.runs and a.in_postgres], careful)
    after_failed = await after_effects(conn, attempts)
    writes = Writes()
    by_attempt: dict[int, ExecutionResult] = {}
    concluded: list[Ended] = []
    for a in attempts:
        res, status = a.result, a.status
        if a.runs:
            res, status = _conclude(a, local.get(id(a), a.effect), after_failed.get(id(a)), writes, now)
        elif (
            res is None
            and a.leader is not None
            and id(a.leader) in by_attempt
            and not isinstance(a.plan, idem.Mismatch)
        ):
            res = answers.replay(a.record, a.traceparent, answers.stored_response(by_attempt[id(a.leader)]), now)
        concluded.append((res, status))
        if res is not None:
            by_attempt[id(a)] = res
            _publish(a, res, status, writes)
    held, appended = await writes.write(conn, topics, lease)
    return Recorded(concluded, held, appended)


def _conclude(
    a: Attempt, effect: Effect | None, after_error: str | None, writes: Writes, now: int
) -> tuple[ExecutionResult, KeyStatus]:
    """A call whose effect ran this round: its result, its compensation's bookkeeping, its key."""
    ended = decision.conclude(a.job, a.traceparent, a.plan, a.original is not None, effect, now)
    res, status = ended.result, ended.status
    if after_error is not None:
        res = decision.after_effect_failed(res, after_error)
    if a.original is not None:
        _compensation(a, a.original, decision.compensation_after(status), writes, now)
    if a.unwritten:
        writes.insert.append(keys.settled_row(a, res, status))
    elif a.key is not None:
        writes.settle.append(keys.settlement(a.record.tenant_id, a.key, res, status))
    if a.ticket is not None and status in idem.ENDED:
        writes.spent.append(a.ticket.approval_id)
    if a.key is None and status is not KeyStatus.PENDING:
        writes.reads.append(reads.outcome_row(a, res))
    return res, status


def _compensation(
    a: Attempt,
    original: compensation.Original,
    after: decision.Undone | decision.NotUndone | None,
    writes: Writes,
    now: int,
) -> None:
    """The earlier call a compensation undid becomes COMPENSATED; one it failed to undo is
    marked COMPENSATION_FAILED and the compensation's request dead-lettered for an operator."""
    if isinstance(after, decision.Undone):
        writes.compensated.append((a.key, original.tenant_id, original.key))
    elif isinstance(after, decision.NotUndone):
        writes.compensation_failed.append((original.tenant_id, original.key))
        letter = deadletters.for_request(
            a.record,
            codec().encode(a.record),
            stage=STAGE,
            taxonomy=TaxonomyClass.COMPENSATION_FAILED,
            now_ms=now,
            reason=f"compensation of {a.record.compensation_of} failed",
        )
        writes.rows.append(
            outbox.record(
                "deadletter",
                letter,
                key=a.record.call_id,
                traceparent=a.traceparent,
                call_id=a.record.call_id,
                tenant_id=a.record.tenant_id,
            )
        )


def _publish(a: Attempt, res: ExecutionResult, status: KeyStatus | None, writes: Writes) -> None:
    """The call's result as an outbox row, and its audit entry when it is audited."""
    writes.results.append(outbox.item("results", a.record.home_partition, res))
    if not decision.audited(a.job.contract, res, status):
        return
    r = a.record
    detail = {
        "tool": r.tool_name,
        "version": r.tool_version,
        "key": fingerprint(a.key) if a.key else None,
        "taxonomy": str(res.outcome.taxonomy_class),
        "status": status,
        "idempotency_hit": res.idempotency_hit,
        "approval_id": r.approval_id,
    }
    writes.entries.append(
        audit.Entry(STAGE, decision.action(res, status), r.principal.user_id, r.call_id, r.tenant_id, detail)
    )


async def local_effects(conn: AsyncConnection[Any], local: list[Attempt], careful: bool) -> dict[int, Effect]:
    """Run the Postgres effects in the recording transaction; an approved one only while its
    target, locked now, is still in the state the approver saw, consuming its ticket here."""
    bound = [a for a in local if a.ticket is not None and a.ticket.state_version is not None]
    versions = await tickets.state_now(conn, [(a.record, a.job.contract) for a in bound], for_update=True)
    effects: dict[int, Effect] = {}
    for a, version in zip(bound, versions, strict=True):
        moved = clearance.stale(a.ticket, version)
        if moved is not None:
            effects[id(a)] = failed(moved.taxonomy, moved.code, moved.message, final=True)
    for a in await unconsumed(conn, [a for a in local if id(a) not in effects]):
        effects[id(a)] = consumed_elsewhere(a)
    run = [a for a in local if id(a) not in effects]
    effects.update(zip(map(id, run), await run_postgres_batch(conn, [a.job for a in run], careful), strict=True))
    return effects


async def after_effects(conn: AsyncConnection[Any], attempts: list[Attempt]) -> dict[int, str]:
    """The binding's after_effect of each external effect that completed now, in the
    transaction that records it: which failed, and why."""
    done = [a for a in attempts if a.runs and isinstance(a.effect, Done) and "after_effect" in a.job.contract.binding]
    errors = await run_after_effects(conn, [(a.job, a.effect.data) for a in done if isinstance(a.effect, Done)])
    return {id(a): error for a, error in zip(done, errors, strict=True) if error is not None}
