"""The execution handler: tool.executable -> effects, exactly once -> outbox -> tool.results.

A round, for all its calls at once (each call's choices are decision.py's):
  0. prepare, before anything: the arguments must hash to the validated payload hash; a late
     or dry-run call is settled here (decision.prepare), and a read that already has a first
     outcome is answered from it (reads.py) in phase A's transaction.
  A. reserve (reservation.py): one transaction checks the approval tickets under FOR UPDATE
     (clearance.py) (and, for an effect outside Postgres, its target's state, and consumes its
     ticket: the last transaction before that effect), inserts PENDING keys (leased to this
     process) and reads the existing ones under SELECT ... FOR UPDATE (keys.py); the
     idempotency plan decides each call.
  E. external effects (http, python) run concurrently, outside any transaction; an unknown
     outcome is checked with the provider's status query at once.
  B. record (recording.py): one transaction re-reads approved targets under FOR UPDATE
     (STALE_STATE if they moved since approval) and consumes their tickets, runs the Postgres
     effects (all at once; if one is refused, the transaction runs again with a savepoint for
     each), writes COMPLETED / FAILED / still-PENDING, every call's result as an outbox row,
     and the audit entries. A co-located effect therefore commits with its COMPLETED record and
     outbox row or not at all. B is retried on transient failures without re-running E.
A round whose effects all run in Postgres does A and B in one transaction: nothing happens
between them that a rollback could not undo, so the reservation's own commit is saved.
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
from toolgate.hashing import idempotency_key_for
from toolgate.schemas.models import StageRecord
from toolgate.scrubber import SCRUBBER
from toolgate.secrets import SecretProvider
from toolgate.settings import Settings
from toolgate.store import batch
from toolgate.store.db import make_pool
from toolgate.store.outbox import mark_published
from toolgate.topics.catalog import Topics
from toolgate.workers.execution import clearance, decision, keys, reads, recording, reservation
from toolgate.workers.execution.answers import STAGE
from toolgate.workers.execution.attempt import Attempt
from toolgate.workers.execution.effects import Done, Job, Unknown
from toolgate.workers.execution.executors import Refused, run_python
from toolgate.workers.execution.http import HttpExecutor
from toolgate.workers.execution.retry import deadline_for, policy_for, with_retries
from toolgate.workers.runtime import outbox
from toolgate.workers.runtime.clock import now_ms
from toolgate.workers.runtime.emit import Emit
from toolgate.workers.runtime.handler import Handler, Inbound
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
        self.registry = registry
        self.settings = settings
        self.topics = Topics(settings.topic_prefix)
        self.pool = make_pool(settings.database_url, STAGE, max_size=4, autocommit=True)
        self.http = HttpExecutor(settings, SecretProvider(settings.secrets_path))
        owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.lease = reservation.Lease(owner, settings.lease_seconds)
        self.record_retry = TransientRetry(RECORD, log, "recording failed; retrying", {"stage": STAGE})
        self._published: list[int] = []  # outbox rows of results acknowledged, not yet marked sent
        self._marker: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.pool.open()
        await self.http.open()

    # --- the round -----------------------------------------------------------------------

    async def handle(self, calls: list[Inbound[StageRecord]], out: Emit) -> None:
        now = now_ms()
        attempts = [self._prepare(call, now) for call in calls]
        if all(a.in_postgres for a in attempts if a.result is None):
            try:
                held = await self._reserve_and_record(attempts, now, careful=False)
            except (Refused, keys.KeyTaken):
                # Nothing of the round was committed: it runs again from the start, each effect
                # in a savepoint of its own, so the refused one spoils none of the others (and a
                # key taken meanwhile is found).
                attempts = [self._prepare(call, now) for call in calls]
                held = await self._reserve_and_record(attempts, now, careful=True)
        else:
            await self._reserve(attempts, now)
            external = [a for a in attempts if a.runs and not a.in_postgres and a.effect is None]
            await self._external_effects(external)
            if any(a.job.contract.executor["kind"] == "http" for a in external):
                crash_point("execution.after_http_effect")
            held = await self._record(attempts)
        crash_point("execution.after_commit")
        held.publish(out)
        for a in attempts:
            if a.result is not None:
                out.outcomes[a.record.call_id] = str(a.result.outcome.taxonomy_class)

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

    def _prepare(self, call: Inbound[StageRecord], now: int) -> Attempt:
        record = call.model
        contract = self.registry.get(record.tool_name, record.tool_version)
        deadline = deadline_for(contract, now, record.deadline_ms)
        key = idempotency_key_for(record) if contract.is_mutation else None
        a = Attempt(call, Job(record, contract, key or "", deadline), key)
        prepared = decision.prepare(record, contract, key, call.traceparent, now)
        if isinstance(prepared, decision.Answer):
            a.result = prepared.result
        elif isinstance(prepared, decision.Late):
            a.late = True
        elif isinstance(prepared, decision.Run):
            a.plan = prepared.plan
        return a

    # --- A: reservation --------------------------------------------------------------------

    async def _reserve(self, attempts: list[Attempt], now: int) -> None:
        """Phase A's one transaction (reservation.py), then what runs no effect is answered."""
        if not _held(attempts) and not _keyed(attempts) and not _reads(attempts):
            return
        async with self.pool.connection() as conn, conn.transaction():
            keyed = await self._reserve_in(conn, attempts, now, deferred=False)
        for a in keyed:
            self._settle_without_effect(a, now)

    async def _reserve_in(
        self, conn: AsyncConnection[Any], attempts: list[Attempt], now: int, *, deferred: bool
    ) -> list[Attempt]:
        """Phase A's work in `conn`'s transaction; returns the calls that reserved a key
        (`deferred`: new keys are inserted with their end, in this transaction)."""
        await reservation.settle_late(conn, [a for a in attempts if a.late], now)
        await reads.replay_copies(conn, _reads(attempts), now)
        await reservation.clear(conn, _held(attempts), now)
        keyed = _keyed(attempts)
        await reservation.reserve(conn, keyed, now, self.lease, self.registry, deferred=deferred)
        await reservation.bind_remote(conn, attempts)
        return keyed

    async def _reserve_and_record(self, attempts: list[Attempt], now: int, careful: bool) -> outbox.Held:
        """A round whose effects all run in Postgres: phases A and B in one transaction, one
        commit fewer. Nothing runs outside it, so a failure rolls back the keys' reservation
        with the rest, and the round is retried whole (rounds.py), as a crash would; not
        `careful`, a refused effect raises `Refused` once all is rolled back."""
        async with self.pool.connection() as conn, batch.transaction(conn):
            await recording.begin(conn)
            keyed = await self._reserve_in(conn, attempts, now, deferred=True)
            for a in keyed:
                self._settle_without_effect(a, now)
            recorded = await recording.record_once(conn, attempts, self.topics, self.lease, now_ms(), careful)
            await recording.commit(conn, recorded)
        return self._concluded(attempts, recorded)

    def _settle_without_effect(self, a: Attempt, now: int) -> None:
        """After the reservation: answer what runs no effect (replays, conflicts)."""
        if a.result is not None:
            return
        if a.leader is not None:
            a.plan = decision.follower_plan(a.leader.record, a.leader.plan, a.record)
        if a.plan is None:
            return
        settled = decision.after_reservation(a.record, a.traceparent, a.plan, now)
        if isinstance(settled, decision.Answer):
            a.result = settled.result
        elif isinstance(settled, decision.Held):
            log.info("held: key in flight", extra={"stage": STAGE, "action": "hold", "call_id": a.record.call_id})

    # --- E: external effects ---------------------------------------------------------------

    async def _external_effects(self, attempts: list[Attempt]) -> None:
        async def one(a: Attempt) -> None:
            policy = policy_for(a.job.contract)
            if a.job.contract.executor["kind"] == "http":
                effect = await with_retries(lambda: self.http.run(a.job, now_ms()), policy, a.job.deadline_ms)
                if isinstance(effect, Unknown):
                    checked = await self.http.status(a.job, now_ms())
                    if not isinstance(checked, Unknown):
                        effect = checked
            else:
                effect = await with_retries(lambda: run_python(a.job, now_ms()), policy, a.job.deadline_ms)
            # Whatever a provider or tool answered may echo a credential: scrub it here, in the
            # only process that resolved one, before it is stored or published.
            a.effect = Done(SCRUBBER.obj(effect.data)) if isinstance(effect, Done) else effect

        await asyncio.gather(*(one(a) for a in attempts))

    # --- B: record -------------------------------------------------------------------------

    async def _record(self, attempts: list[Attempt]) -> outbox.Held:
        """Phase B, retried on transient failures without running E again; a refused Postgres
        effect makes it run again with a savepoint for each."""

        async def once(careful: bool) -> recording.Recorded:
            async with self.pool.connection() as conn, batch.transaction(conn):
                await recording.begin(conn)
                recorded = await recording.record_once(conn, attempts, self.topics, self.lease, now_ms(), careful)
                await recording.commit(conn, recorded)
                return recorded

        try:
            recorded = await self.record_retry.run(partial(once, False))
        except Refused:
            recorded = await self.record_retry.run(partial(once, True))
        return self._concluded(attempts, recorded)

    @staticmethod
    def _concluded(attempts: list[Attempt], recorded: recording.Recorded) -> outbox.Held:
        """Committed: each call's result and key status take effect; the rows to publish."""
        for a, (res, status) in zip(attempts, recorded.ended, strict=True):
            a.result, a.status = res, status
        return recorded.held


def _held(attempts: list[Attempt]) -> list[Attempt]:
    """The calls whose approval tickets phase A checks."""
    return [
        a for a in attempts if a.result is None and not a.late and clearance.approvals_needed(a.record, a.job.contract)
    ]


def _keyed(attempts: list[Attempt]) -> list[Attempt]:
    """The calls whose idempotency keys phase A reserves."""
    return [a for a in attempts if a.result is None and a.key is not None]


def _reads(attempts: list[Attempt]) -> list[Attempt]:
    """The reads about to run, which a first outcome of the same call answers instead (reads.py)."""
    return [a for a in attempts if a.result is None and a.key is None and not a.late]
