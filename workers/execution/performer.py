"""The I/O execution's machine asks for (asks.py), performed: the driver's only work.

`Performer.drive` runs a step (machine.py) to its end: it sends each ask's answer back and
returns the state the step reached. What runs in a transaction runs on the connection the
driver (handler.py) opened for the step; the effects outside Postgres and the provider's status
query need none. The statements are store/'s; nothing here decides.
"""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar

from psycopg import AsyncConnection

from toolgate.schemas.codec import codec
from toolgate.schemas.hashing import usage_events
from toolgate.schemas.models import StageRecord
from toolgate.scrubber import SCRUBBER
from toolgate.secrets import SecretProvider
from toolgate.settings import Settings
from toolgate.store import approvals, audit, quarantine, values
from toolgate.store import keys as idempotency_keys
from toolgate.store import reads as read_outcomes
from toolgate.store.db import rows_json
from toolgate.store.keys import json_or_none
from toolgate.store.outbox import enqueue, enqueue_held, held_ids
from toolgate.topics.catalog import Topics
from toolgate.workers.execution import asks, tickets
from toolgate.workers.execution.answers import STAGE
from toolgate.workers.execution.children import Children
from toolgate.workers.execution.compensation import Original
from toolgate.workers.execution.decision import StoredOutcome
from toolgate.workers.execution.effects import Done, Effect, Job, Unknown
from toolgate.workers.execution.executors import run_after_effects, run_postgres_batch
from toolgate.workers.execution.http import HttpExecutor
from toolgate.workers.execution.machine import Lease
from toolgate.workers.execution.retry import policy_for, with_retries
from toolgate.workers.execution.writes import Quarantined, Writes
from toolgate.workers.runtime import outbox
from toolgate.workers.runtime.clock import now_ms

T = TypeVar("T")
Conn = AsyncConnection[Any]


class KeyTaken(Exception):
    """A key its round found new was inserted by another transaction meanwhile: the round rolls
    back whole and runs again, and then finds the key (the handler)."""


class Performer:
    """Performs asks: with `lease` and `topics`, execution's round; without, reconciliation's
    (pending.py: the provider's status query, a binding's after_effect)."""

    def __init__(self, http: HttpExecutor, lease: Lease | None = None, topics: Topics | None = None) -> None:
        self.http = http
        self.children = Children(http.secrets)
        self._lease = lease
        self._topics = topics

    @classmethod
    def of(cls, settings: Settings, lease: Lease | None = None, topics: Topics | None = None) -> Performer:
        """A performer with its own HTTP executor, which resolves the secrets of `settings`."""
        return cls(HttpExecutor(settings, SecretProvider(settings.secrets_path)), lease, topics)

    @property
    def lease(self) -> Lease:
        if self._lease is None:
            raise RuntimeError("this performer reserves no keys")
        return self._lease

    @property
    def topics(self) -> Topics:
        if self._topics is None:
            raise RuntimeError("this performer writes no outbox rows")
        return self._topics

    async def drive(self, conn: Conn | None, step: asks.Step[T]) -> T:
        """Run `step` to its end, performing each ask on `conn` (None: the step asks for nothing
        in a transaction)."""
        answer: Any = None
        while True:
            try:
                request = step.send(answer)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            answer = await self.perform(conn, request)

    async def perform(self, conn: Conn | None, request: asks.Ask[Any]) -> Any:
        match request:
            case asks.RunExternal(jobs):
                return await asyncio.gather(*(self.external(job) for job in jobs))
            case asks.CheckStatus(job, now):
                return await self.http.status(job, now)
        if conn is None:
            raise RuntimeError(f"{type(request).__name__} needs the step's transaction")
        if isinstance(request, asks.Write):
            return await self.write(conn, request.writes)
        return await self._read(conn, request)

    async def _read(self, conn: Conn, request: asks.Ask[Any]) -> Any:
        match request:
            case asks.ReadOutcomes(idents):
                return {
                    (o.tenant_id, o.idempotency_key): StoredOutcome(o.status, o.request_hash, o.response)
                    for o in await idempotency_keys.outcomes(conn, list(idents))
                }
            case asks.ReadFirstOutcomes(idents):
                return {o.ident: (o.request_hash, o.response) for o in await read_outcomes.load(conn, list(idents))}
            case asks.LoadTickets(ids):
                return await tickets.load(conn, ids)
            case asks.LoadOriginals(records):
                return await originals(conn, records)
            case asks.LockKeys(idents):
                return await idempotency_keys.lock(conn, list(idents))
            case asks.ReserveKeys(rows, lease_s):
                return await idempotency_keys.reserve(conn, list(rows), self.lease.owner, lease_s)
            case asks.RedriveKeys(rows, lease_s):
                return await idempotency_keys.redrive(conn, list(rows), self.lease.owner, lease_s)
            case asks.TargetState(jobs, for_update):
                return await tickets.state_now(conn, jobs, for_update=for_update)
            case asks.ConsumeTickets(released):
                return await tickets.consume(conn, released)
            case asks.RunPostgres(jobs, careful):
                return await run_postgres_batch(conn, list(jobs), careful)
            case asks.RunAfterEffects(done):
                return await run_after_effects(conn, list(done))
        raise TypeError(f"no way to perform {request!r}")

    async def external(self, job: Job) -> Effect:
        """An effect outside Postgres, retried by its contract's policy; an unknown HTTP outcome is
        checked with the provider's status query at once."""
        policy = policy_for(job.contract)
        if job.contract.executor["kind"] == "http":
            effect = await with_retries(lambda: self.http.run(job, now_ms()), policy, job.deadline_ms)
            if isinstance(effect, Unknown):
                checked = await self.http.status(job, now_ms())
                if not isinstance(checked, Unknown):
                    effect = checked
        else:
            effect = await with_retries(lambda: self.children.run(job, now_ms()), policy, job.deadline_ms)
        # Whatever a provider or tool answered may echo a credential: scrub it here, in the
        # only process that resolved one, before it is stored or published.
        return Done(SCRUBBER.obj(effect.data)) if isinstance(effect, Done) else effect

    async def write(self, conn: Conn, writes: Writes) -> asks.Written:
        """The writes, and the audit chain's append for the commit to run with COMMIT.

        Pipelined: these writes need no answer but the keys inserted, the held rows' ids and the
        audit chain's tail, so they go out with the chain's lock and the read of its tail, one
        round trip for all (the server runs them in order, in this transaction). A new key taken
        meanwhile raises `KeyTaken`."""
        lease, topics = self.lease, self.topics
        insert = [{**row, "response": json_or_none(row["response"])} for row in writes.insert]
        reads = [(tenant, call_id, hashed, rows_json(response)) for tenant, call_id, hashed, response in writes.reads]
        letters = [outbox.record("deadletter", letter, address) for letter, address in writes.letters]
        results = [outbox.item("results", partition, res) for partition, res in writes.results]
        held = tail = None
        async with conn.pipeline():
            inserted = await idempotency_keys.insert_settled(conn, insert, lease.owner, lease.seconds)
            await idempotency_keys.settle(conn, writes.settle, lease.seconds)
            await idempotency_keys.mark_compensated(conn, writes.compensated)
            await idempotency_keys.mark_compensation_failed(conn, writes.compensation_failed)
            if writes.spent:
                await approvals.spend(conn, writes.spent)
            await read_outcomes.store(conn, reads)
            await enqueue(conn, letters, topics)
            await quarantine.hold(conn, [held_version(q) for q in writes.quarantine])
            if writes.released:  # ended for good: never run again
                await values.release(conn, writes.released, ended=True)
            if results:
                held = await enqueue_held(conn, results, topics)
            if writes.entries:
                tail = await audit.tail(conn)
        if inserted is not None:
            new = {(row["tenant_id"], row["idempotency_key"]) for row in insert}
            missing = len(new - await idempotency_keys.inserted(inserted))
            if missing:
                raise KeyTaken(f"{missing} new key(s) were inserted by another transaction meanwhile")
        ids = await held_ids(held) if held is not None else []
        rows = audit.rows_statement(await tail.fetchone(), writes.entries) if tail is not None else None
        return outbox.Held(ids, results), rows


def held_version(q: Quarantined) -> quarantine.Quarantine:
    """A tool version execution caught writing READ_ONLY, as the store keeps its quarantine."""
    return quarantine.Quarantine(q.tool_name, q.tool_version, q.reason, STAGE, q.call_id, q.tenant_id)


async def originals(conn: Conn, records: tuple[StageRecord, ...]) -> dict[tuple[str, str], Original]:
    """The earlier calls compensations undo: their key rows, locked for this transaction, by
    (tenant, call_id)."""
    found = {}
    for row in await idempotency_keys.to_compensate(
        conn, [(r.call.tenant_id, r.call.compensation_of or "") for r in records]
    ):
        request = codec().decode(row.request, StageRecord).call
        data = (row.response or {}).get("data") or {}
        found[(row.tenant_id, row.call_id)] = Original(
            row.tenant_id,
            row.idempotency_key,
            row.status,
            row.tool_name,
            row.tool_version,
            row.compensated_by,
            request.arguments,
            data,
            usage_events(request),
        )
    return found
