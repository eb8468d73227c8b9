"""The outbox relay: publishes outbox rows, then marks them sent.

Claims unsent rows in id order with FOR UPDATE SKIP LOCKED (so several relays can run side
by side without publishing a row twice), groups item rows into one StageBatch per topic and
partition, produces everything with an idempotent producer (confluent-kafka: sequence
numbers per partition, so a send retried after a lost acknowledgement is written once) and
waits for every delivery report, then marks the rows sent in the same transaction that
locked them. Each record leaves sealed like any stage's output: a MAC on internal topics and
dead letters, the deployment's signature on a tenant's edge topics (toolgate.integrity). A
crash between produce and commit re-publishes the rows: downstream consumers are idempotent.
The relay sleeps on LISTEN toolgate_outbox (a trigger notifies on insert) instead of polling
tightly, and prunes sent rows after a retention period, so the table stays bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

import psycopg
from confluent_kafka import KafkaError, Producer

from toolgate.integrity import Sealer, deployment_keys
from toolgate.kafka_security import client_config
from toolgate.settings import Settings
from toolgate.topics.catalog import Topics
from toolgate.workers.runtime.app import StageApp
from toolgate.workers.runtime.db import is_transient, make_pool
from toolgate.workers.runtime.emit import EdgeRecord, Emit, Message

log = logging.getLogger("toolgate.outbox")
STAGE = "outbox-relay"

CLAIM = """
SELECT id, topic, partition, kind, key, payload, headers FROM toolgate.outbox
WHERE sent_at IS NULL ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED
"""
MARK_SENT = "UPDATE toolgate.outbox SET sent_at = now() WHERE id = ANY(%s)"
PRUNE = "DELETE FROM toolgate.outbox WHERE sent_at < now() - make_interval(secs => %s)"


class OutboxRelay:
    def __init__(
        self, app: StageApp | None, settings: Settings, batch: int = 2000, retention_s: float = 3600.0
    ) -> None:
        self.app = app
        self.settings = settings
        self.batch = batch
        self.retention_s = retention_s
        self.pool = make_pool(settings.database_url, STAGE, max_size=2)
        self.producer = IdempotentProducer(settings.kafka_bootstrap, client_config(settings))
        self.sealer = Sealer(deployment_keys(settings), Topics(settings.topic_prefix))
        self.wakeup = asyncio.Event()
        self._last_prune = 0.0

    async def run(self) -> None:
        await self.pool.open()
        listener = asyncio.ensure_future(self._listen())
        if self.app is not None:
            self.app.mark_ready()
        try:
            while True:
                try:
                    moved = await self.relay_once()
                    await self._prune()
                except Exception as exc:
                    if not is_transient(exc):
                        log.exception("relay round failed", extra={"stage": STAGE, "action": "relay_failed"})
                    await asyncio.sleep(1.0)
                    continue
                if moved < self.batch:
                    self.wakeup.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self.wakeup.wait(), 1.0)
        finally:
            listener.cancel()

    async def relay_once(self) -> int:
        async with self.pool.connection() as conn, conn.transaction():
            cur = await conn.execute(CLAIM, (self.batch,))
            rows = await cur.fetchall()
            if not rows:
                return 0
            out = Emit(STAGE)
            for _id, topic, partition, kind, key, payload, headers in rows:
                if kind == "item":
                    out.raw_item(topic, partition, bytes(payload))
                else:
                    out.records.append(
                        EdgeRecord(
                            topic,
                            bytes(key) if key is not None else None,
                            bytes(payload),
                            [(k, v.encode()) for k, v in headers],
                            partition,
                        )
                    )
            await self.producer.deliver(out.messages(None, self.settings.batch_bytes, self.sealer))
            await conn.execute(MARK_SENT, ([r[0] for r in rows],))
        return len(rows)

    async def _prune(self) -> None:
        if time.monotonic() - self._last_prune >= 60.0:
            self._last_prune = time.monotonic()
            await self.prune()

    async def prune(self) -> int:
        """Delete rows sent longer than the retention ago; returns how many."""
        async with self.pool.connection() as conn:
            cur = await conn.execute(PRUNE, (self.retention_s,))
            return cur.rowcount

    async def _listen(self) -> None:
        """Set `wakeup` whenever a transaction inserts outbox rows; reconnect if Postgres goes away."""
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(self.settings.database_url, autocommit=True) as conn:
                    await conn.execute("LISTEN toolgate_outbox")
                    self.wakeup.set()  # rows may have arrived while we were not listening
                    async for _ in conn.notifies():
                        self.wakeup.set()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("listen connection lost", extra={"stage": STAGE, "action": "relisten", "error": repr(exc)})
                await asyncio.sleep(1.0)


class IdempotentProducer:
    """confluent-kafka's idempotent producer, awaited: `deliver` returns once every record
    has its delivery report, and raises if any failed (the rows stay unsent)."""

    def __init__(self, bootstrap: str, config: dict[str, str] | None = None) -> None:
        self._producer = Producer(
            {
                **(config or {}),
                "bootstrap.servers": bootstrap,
                "client.id": "toolgate-outbox-relay",
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 2,
                "partitioner": "murmur2_random",  # the same partition for a key as Faust's producer
                "message.timeout.ms": 30_000,
            }
        )

    async def deliver(self, messages: list[Message]) -> None:
        errors: list[str] = []

        def report(err: KafkaError | None, _msg: Any) -> None:
            if err is not None:
                errors.append(str(err))

        for m in messages:
            kwargs: dict[str, Any] = {"key": m.key, "value": m.value, "headers": m.headers, "on_delivery": report}
            if m.partition is not None:
                kwargs["partition"] = m.partition
            while True:
                try:
                    self._producer.produce(m.topic, **kwargs)
                    break
                except BufferError:
                    await asyncio.to_thread(self._producer.poll, 0.05)
        remaining = await asyncio.to_thread(self._producer.flush, 30.0)
        if remaining or errors:
            raise ConnectionError(f"{remaining} records undelivered, errors: {errors[:3]}")


def attach(app: StageApp, settings: Settings) -> OutboxRelay:
    relay = OutboxRelay(app, settings)

    async def relay_task() -> None:
        await relay.run()

    app.task(relay_task, "outbox_relay")
    return relay


__all__ = ["OutboxRelay", "attach"]
