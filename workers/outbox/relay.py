"""The outbox relay: publishes outbox rows, then marks them sent.

Claims unsent rows in id order with FOR UPDATE SKIP LOCKED (so several relays can run side
by side without publishing a row twice), groups item rows into one StageBatch per topic and
partition, produces everything with a stage's idempotent producer (workers/runtime/producer.py: sequence
numbers per partition, so a send retried after a lost acknowledgement is written once) and
waits for every delivery report, then marks the rows sent in the same transaction that
locked them. Each record leaves sealed like any stage's output: a MAC on internal topics and
dead letters, the deployment's signature on a tenant's edge topics (toolgate.trust.integrity). A
crash between produce and commit re-publishes the rows: downstream consumers are idempotent.
The relay sleeps on LISTEN toolgate_outbox (a trigger notifies on insert) instead of polling
tightly, and prunes sent rows after a retention period, so the table stays bounded. Rows their
writer publishes itself (execution's results) are inserted held: the relay takes one only if it
is still unsent when its hold ends, as a crash leaves it. The statements are store/outbox.py's.

A row the broker can never take (too large, malformed), or that keeps failing past
MAX_ATTEMPTS, is given up: marked failed and dead-lettered (its payload and why), so it never
blocks the rows behind it. When a round's batched delivery fails, its rows are sent one by one
to tell which.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

import psycopg
from confluent_kafka import KafkaError

from toolgate.faults import crash_point
from toolgate.schemas.errors import PermanentError
from toolgate.schemas.models import PayloadKind, TaxonomyClass
from toolgate.settings import Settings
from toolgate.store import outbox
from toolgate.store.db import make_pool
from toolgate.store.notifications import listening, waking
from toolgate.store.outbox import Claimed, RowKind
from toolgate.topics.catalog import Topics
from toolgate.topics.producers import Record
from toolgate.trust.integrity import Sealer, deployment_keys
from toolgate.workers.runtime.app import StageApp
from toolgate.workers.runtime.emit import Emit, Origin
from toolgate.workers.runtime.producer import StageProducer, undeliverable
from toolgate.workers.runtime.transient import RELAY, TransientRetry
from toolgate.workers.runtime.wakeup import announcer

log = logging.getLogger("toolgate.outbox")
STAGE = "outbox-relay"
RELAY_CLIENT = "toolgate-outbox-relay"  # its producer's client.id

MAX_ATTEMPTS = 20  # with a backoff of up to a minute between them: about a quarter of an hour
# An idle relay sleeps until the next unsent row with a time of its own (a held row's hold, a
# retry's backoff) is due, or until a notification (every insert notifies), at most IDLE_LOOK_S.
# Rows claimed elsewhere or inserted while the listener was away are what the look is for. It
# looked every second before: most of an idle relay's CPU
# (docs/performance.md, "Figures behind the code").
IDLE_LOOK_S = 5.0
BUSY_LOOK_S = 1.0


class OutboxRelay:
    def __init__(
        self, app: StageApp | None, settings: Settings, batch: int = 2000, retention_s: float = 3600.0
    ) -> None:
        self.app = app
        self.settings = settings
        self.batch = batch
        self.retention_s = retention_s
        self.pool = make_pool(settings.database_url, STAGE, max_size=2)
        self.topics = Topics(settings.topic_prefix)
        announcing = announcer(settings)
        self.producer = StageProducer(settings, RELAY_CLIENT, announcing.delivered if announcing is not None else None)
        self.sealer = Sealer(deployment_keys(settings), self.topics)
        self.wakeup = asyncio.Event()
        self._last_prune = 0.0
        # A transient failure (Postgres restarting, a lost connection) retries the round every
        # second, logged at debug only: a relay stuck that way shows in `toolgate health` as
        # unsent outbox rows. Any other failure is logged and the next round comes a second later.
        self.retry = TransientRetry(
            RELAY, log, "transient failure, retrying the relay round", {"stage": STAGE}, logging.DEBUG
        )

    async def run(self) -> None:
        self.producer.start(asyncio.get_running_loop())
        await self.pool.open()
        listener = asyncio.ensure_future(self._listen())
        if self.app is not None:
            self.app.mark_ready()
        try:
            while True:
                # Cleared before the round, not after it: a notification that arrives while the
                # round runs (rows committed after its claim) starts the next round at once
                # instead of being wiped out and waited for until the timeout.
                self.wakeup.clear()
                try:
                    moved = await self.retry.run(self._round)
                except Exception:
                    log.exception("relay round failed", extra={"stage": STAGE, "action": "relay_failed"})
                    await asyncio.sleep(1.0)
                    continue
                if moved < self.batch:
                    look = await self._next_due() if moved == 0 else BUSY_LOOK_S
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self.wakeup.wait(), look)
        finally:
            listener.cancel()
            await asyncio.to_thread(self.producer.close)

    async def close(self) -> None:
        """Close its pool and its producer, what is queued delivered first (a relay driven by
        `relay_once` rather than `run`)."""
        await self.pool.close()
        await asyncio.to_thread(self.producer.close)

    async def _next_due(self) -> float:
        """Seconds until the next held or retried row is due, within [0, IDLE_LOOK_S] (a second
        if Postgres cannot say)."""
        try:
            async with self.pool.connection() as conn:
                due = await outbox.next_due(conn)
                await conn.rollback()
        except psycopg.Error:
            return BUSY_LOOK_S
        return IDLE_LOOK_S if due is None else min(IDLE_LOOK_S, max(0.0, float(due)))

    async def _round(self) -> int:
        moved = await self.relay_once()
        await self._prune()
        return moved

    async def relay_once(self) -> int:
        """One round: claim rows, publish them, mark them sent (or failed); how many moved."""
        async with self.pool.connection() as conn, conn.transaction():
            rows = await outbox.claim(conn, self.batch)
            if not rows:
                return 0
            errors = await self.producer.deliver(self._messages(rows))
            crash_point("relay.during_publish")
            if not any(errors):
                await outbox.mark_sent(conn, [r.id for r in rows])
                return len(rows)
            # Which rows? One message each: what was delivered in the batched try goes again
            # (consumers are idempotent), what fails now fails for a reason of its own.
            alone = await self.producer.deliver([m for row in rows for m in self._messages([row])])
            sent = [row.id for row, error in zip(rows, alone, strict=True) if error is None]
            failing = [(row, error) for row, error in zip(rows, alone, strict=True) if error is not None]
            given_up = await self._give_up(conn, failing)
            await outbox.mark_sent(conn, sent)
        log.warning(
            "outbox rows not delivered",
            extra={"stage": STAGE, "action": "relay_partial", "count": len(failing) - len(given_up)},
        )
        return len(sent) + len(given_up)

    def _messages(self, rows: list[Claimed]) -> list[Record]:
        out = Emit(STAGE)
        for row in rows:
            if row.kind is RowKind.ITEM:
                if row.partition is None:  # `outbox.item` always names one
                    raise PermanentError(f"outbox row {row.id} is an item without a partition")
                out.raw_item(row.topic, row.partition, bytes(row.payload), row.created_at_ms)
            else:
                key = bytes(row.key) if row.key is not None else None
                headers = [(k, v.encode()) for k, v in row.headers]
                out.records.append(Record(row.topic, key, bytes(row.payload), headers, row.partition))
        return out.messages(self.topics, self.settings.batch_bytes, self.sealer, physical=True)

    async def _give_up(
        self, conn: psycopg.AsyncConnection[Any], failing: list[tuple[Claimed, KafkaError]]
    ) -> list[int]:
        """Rows the broker refused for good, or that failed MAX_ATTEMPTS times: dead-lettered
        and marked failed. Returns their ids; the others stay unsent, their attempts counted."""
        if not failing:
            return []
        attempts = await outbox.count_attempts(conn, [row.id for row, _ in failing])
        doomed = [(row, e) for row, e in failing if undeliverable(e) or attempts[row.id] >= MAX_ATTEMPTS]
        if not doomed:
            return []
        letters = Emit(STAGE)
        for row, error in doomed:
            logical = self.topics.parse(row.topic)[0] or row.topic
            kind = PayloadKind.STAGE_ITEM if row.kind is RowKind.ITEM else PayloadKind.RECORD
            origin = Origin(logical, row.partition if row.partition is not None else -1, -1, row.key, [], kind)
            reason = f"outbox row {row.id} was not delivered after {attempts[row.id]} attempt(s): {error.str()}"
            letters.dead_letter(origin, bytes(row.payload), TaxonomyClass.UNKNOWN_ERROR, reason)
        if any(await self.producer.deliver(letters.messages(self.topics, self.settings.batch_bytes, self.sealer))):
            raise ConnectionError("dead letters for undeliverable outbox rows were not delivered")
        ids = [row.id for row, _ in doomed]
        await outbox.mark_failed(conn, ids, [e.str() for _, e in doomed])
        return ids

    async def _prune(self) -> None:
        if time.monotonic() - self._last_prune >= 60.0:
            self._last_prune = time.monotonic()
            await self.prune()

    async def prune(self) -> int:
        """Delete rows sent longer than the retention ago; returns how many."""
        async with self.pool.connection() as conn:
            return await outbox.prune(conn, self.retention_s)

    async def _listen(self) -> None:
        """Set `wakeup` whenever a transaction inserts outbox rows; reconnect if Postgres goes away."""
        await listening(self.settings.database_url, outbox.listen, waking(self.wakeup), log, STAGE)


def attach(app: StageApp, settings: Settings) -> OutboxRelay:
    relay = OutboxRelay(app, settings)

    async def relay_task() -> None:
        await relay.run()

    app.task(relay_task, "outbox_relay")
    return relay


__all__ = ["OutboxRelay", "attach"]
