"""The execution handler: tool.executable -> effects, exactly once -> outbox -> tool.results.

The driver of execution's machine (machine.py): it builds each call, opens the transactions,
performs the I/O each step asks for (performer.py) and publishes; every choice is the
machine's. A round, for all its calls at once:
  prepare                 before anything: the hash, the deadline, a dry run;
  reserve  (transaction)  tickets, compensations, keys, plans (reservation.py);
  run      (none)         the effects outside Postgres, concurrently; an unknown outcome is
                          checked with the provider's status query at once;
  record   (transaction)  the Postgres effects, every call's key, outbox row and audit
                          (recording.py), retried on transient failures without running again;
                          a refused Postgres effect makes it run again with a savepoint for each.
A round whose effects all run in Postgres (`Prepared.co_located`) takes all steps in one
transaction: nothing happens between them that a rollback could not undo, so the
reservation's own commit is saved.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from functools import partial
from typing import Any

from psycopg import AsyncConnection

from toolgate.contracts.registry import Registry
from toolgate.faults import crash_point
from toolgate.schemas.models import StageRecord
from toolgate.settings import Settings
from toolgate.store import batch
from toolgate.store.outbox import mark_published
from toolgate.workers.execution import machine
from toolgate.workers.execution.answers import STAGE
from toolgate.workers.execution.effects import Job
from toolgate.workers.execution.executors import Refused
from toolgate.workers.execution.performer import KeyTaken, Performer
from toolgate.workers.execution.retry import deadline_for
from toolgate.workers.runtime.clock import now_ms
from toolgate.workers.runtime.emit import Emit
from toolgate.workers.runtime.handler import Handler, Inbound
from toolgate.workers.runtime.outbox import Held
from toolgate.workers.runtime.transient import RECORD, TransientRetry

log = logging.getLogger("toolgate.execution")

# Results published by execution are marked sent this often, all in one statement: far within
# their hold (store/outbox.py), after which the relay would publish them again.
MARK_SENT_EVERY_S = 0.5


class ExecutionHandler(Handler[StageRecord]):
    stage = STAGE
    source = "executable"
    model = StageRecord

    def __init__(self, registry: Registry, settings: Settings) -> None:
        super().__init__(registry, settings, max_size=4, autocommit=True)
        self.settings = settings
        owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.lease = machine.Lease(owner, settings.lease_seconds)
        self.performer = Performer.of(settings, self.lease, self.topics)
        self.http = self.performer.http
        self.record_retry = TransientRetry(RECORD, log, "recording failed; retrying", {"stage": STAGE})
        self._published: list[int] = []  # outbox rows of results acknowledged, not yet marked sent
        self._marker: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await super().start()
        await self.http.open()
        self.performer.children.warm(self.registry)

    # --- the round -----------------------------------------------------------------------

    async def handle(self, calls: list[Inbound[StageRecord]], out: Emit) -> None:
        now = now_ms()
        prepared = machine.prepare([self._call(call, now) for call in calls], now)
        if prepared.co_located:
            try:
                recorded, held = await self._in_one_transaction(prepared, careful=False)
            except (Refused, KeyTaken):
                # Nothing of the round was committed: it runs again from the start, each effect
                # in a savepoint of its own, so the refused one spoils none of the others (and a
                # key taken meanwhile is found).
                recorded, held = await self._in_one_transaction(prepared, careful=True)
        else:
            ran = await self._run(await self._reserve(prepared))
            recorded, held = await self._record(ran)
        crash_point("execution.after_commit")
        held.publish(out)
        for res, _ in recorded.ended:
            if res is not None:
                out.end(res)

    async def delivered(self, out: Emit) -> None:
        """The round's results are acknowledged: their outbox rows are marked sent soon, in one
        statement for every round of the last MARK_SENT_EVERY_S, off the calls' path."""
        if out.outbox_ids:
            self._published.extend(out.outbox_ids)
            if self._marker is None:
                self._marker = asyncio.create_task(self._mark_sent_periodically(), name="mark_sent")

    async def stop(self) -> None:
        if self._marker is not None:
            self._marker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._marker  # a mark cut short hands its rows back for the last one
            self._marker = None
        await self._mark_sent()
        await self.performer.children.close()

    async def _mark_sent_periodically(self) -> None:
        while True:
            await asyncio.sleep(MARK_SENT_EVERY_S)
            await self._mark_sent()

    async def _mark_sent(self) -> None:
        """Mark what was published sent. Rows this fails for (or that a crash leaves) the relay
        publishes again when their hold ends: consumers are idempotent."""
        ids, self._published = self._published, []
        if not ids:
            return
        try:
            async with self.pool.connection() as conn:
                await mark_published(conn, ids)
        except asyncio.CancelledError:
            self._published[:0] = ids
            raise
        except Exception as exc:
            log.warning(
                "published results not marked sent; the relay sends them again",
                extra={"stage": STAGE, "action": "mark_sent_failed", "count": len(ids), "error": repr(exc)},
            )

    def _call(self, call: Inbound[StageRecord], now: int) -> machine.Arrived:
        record = call.model
        contract = self.registry.get(record.call.tool_name, record.call.tool_version)
        key = record.call.idempotency_key if contract.is_mutation else None
        job = Job(record, contract, key or "", deadline_for(contract, now, record.call.deadline_ms))
        return machine.Arrived(record, call.traceparent, call.raw, job, key)

    async def _in_one_transaction(self, prepared: machine.Prepared, careful: bool) -> tuple[machine.Recorded, Held]:
        """A round whose effects all run in Postgres: every step in one transaction, one commit
        fewer. Nothing runs outside it, so a failure rolls back the keys' reservation with the
        rest, and the round is retried whole (rounds.py), as a crash would; not `careful`, a
        refused effect raises `Refused` once all is rolled back."""
        async with self.pool.connection() as conn, batch.transaction(conn):
            await batch.run(conn, [batch.BEGIN])
            step = machine.reserve(prepared, self.lease, self.registry, deferred=True)
            reserved = await self.performer.drive(conn, step)
            _log_held(reserved)
            ran = await self.performer.drive(None, machine.run(reserved))
            recorded = await self.performer.drive(conn, machine.record(ran, now_ms(), careful=careful))
            return recorded, await _commit(conn, recorded)

    async def _reserve(self, prepared: machine.Prepared) -> machine.Reserved:
        """The reservation's one transaction, if there is anything to reserve."""
        step = machine.reserve(prepared, self.lease, self.registry, deferred=False)
        if prepared.reserves_nothing:
            return await self.performer.drive(None, step)
        async with self.pool.connection() as conn, conn.transaction():
            reserved = await self.performer.drive(conn, step)
        _log_held(reserved)
        return reserved

    async def _run(self, reserved: machine.Reserved) -> machine.Ran:
        """The effects outside Postgres, outside any transaction."""
        ran = await self.performer.drive(None, machine.run(reserved))
        if any(c.runs and c.call.job.contract.executor["kind"] == "http" for c in reserved.calls if c.effect is None):
            crash_point("execution.after_http_effect")
        return ran

    async def _record(self, ran: machine.Ran) -> tuple[machine.Recorded, Held]:
        """The recording's transaction, retried on transient failures without running anything
        outside it again; a refused Postgres effect makes it run again with a savepoint for each."""

        async def once(careful: bool) -> tuple[machine.Recorded, Held]:
            async with self.pool.connection() as conn, batch.transaction(conn):
                await batch.run(conn, [batch.BEGIN])
                recorded = await self.performer.drive(conn, machine.record(ran, now_ms(), careful=careful))
                return recorded, await _commit(conn, recorded)

        try:
            return await self.record_retry.run(partial(once, False))
        except Refused:
            return await self.record_retry.run(partial(once, True))


async def _commit(conn: AsyncConnection[Any], recorded: machine.Recorded) -> Held:
    """Append the round's audit entries and commit, in one round trip; the rows to publish."""
    held, appended = recorded.written
    await batch.run(conn, [appended, batch.COMMIT] if appended is not None else [batch.COMMIT])
    return held


def _log_held(reserved: machine.Reserved) -> None:
    for record in machine.held(reserved):
        log.info("held: key in flight", extra={"stage": STAGE, "action": "hold", "call_id": record.call.call_id})
