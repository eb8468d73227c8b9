"""Several outbox relays, one outbox: every row is published once, then marked sent, then pruned.

Runs two relays side by side (as two relay processes would), each test against a database and
a topic catalog of its own on the session's Postgres and broker: no worker runs.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from confluent_kafka import Consumer, TopicPartition

from toolgate.ops.stack.embedded import Broker
from toolgate.schemas.codec import codec
from toolgate.schemas.models import StageBatch
from toolgate.settings import Settings
from toolgate.store import outbox
from toolgate.store import outbox as outbox_rows
from toolgate.store.outbox import INSERT, OutboxRow, RowKind, columns
from toolgate.topics.catalog import Topics
from toolgate.trust.integrity import Sealer, deployment_keys
from toolgate.workers.outbox.relay import OutboxRelay

from ..conftest import eventually
from .conftest import Server, fresh_topics, with_topics

ROWS = 3000


@contextmanager
def scratch(postgres: Server, broker: Broker) -> Iterator[Settings]:
    """A database and a topic catalog of this test's own (each test counts every row and every
    message); the settings of a relay working on them."""
    with postgres.scratch("relay") as database:
        yield with_topics(database, broker, fresh_topics(broker, "relay"))


def enqueue(settings: Settings, items: list[tuple[int, bytes]]) -> None:
    """Outbox rows of kind item for tool.results, (partition, payload) each."""
    rows = [OutboxRow("results", p, RowKind.ITEM, None, v) for p, v in items]
    topics = Topics(settings.topic_prefix)
    with psycopg.connect(settings.database_url, autocommit=True) as conn:
        for chunk in range(0, len(rows), 500):
            conn.execute(INSERT, columns(rows[chunk : chunk + 500], topics))


def published(settings: Settings, partitions: tuple[int, ...]) -> Iterator[Any]:
    """Every message on tool.results under the scratch prefix, until 3 s pass without one."""
    topic = Topics(settings.topic_prefix).results
    consumer = Consumer(
        {"bootstrap.servers": settings.kafka_bootstrap, "group.id": f"relay-test-{uuid.uuid4().hex[:6]}"}
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    idle = time.monotonic()
    try:
        while time.monotonic() - idle < 3.0:
            for msg in consumer.consume(500, 0.2):
                if not msg.error():
                    idle = time.monotonic()
                    yield msg
    finally:
        consumer.close()


def test_two_relays_publish_each_row_once_and_prune(postgres: Server, broker: Broker) -> None:
    with scratch(postgres, broker) as settings:
        enqueue(settings, [(i % 2, f"item-{i}".encode()) for i in range(ROWS)])
        topic = Topics(settings.topic_prefix).results
        sealer = Sealer(deployment_keys(settings), Topics(settings.topic_prefix))

        async def drain() -> list[int]:
            relays = [OutboxRelay(None, settings, batch=400, retention_s=0.0) for _ in range(2)]
            for relay in relays:
                await relay.pool.open()
            moved = [0, 0]

            async def loop(i: int) -> None:
                while (n := await relays[i].relay_once()) > 0:
                    moved[i] += n

            await asyncio.gather(loop(0), loop(1))
            pruned = await relays[0].prune()
            for relay in relays:
                await relay.close()
            return [*moved, pruned]

        first, second, pruned = asyncio.run(drain())
        assert first + second == ROWS and first > 0 and second > 0  # both took part, no row twice
        with psycopg.connect(settings.database_url) as conn:
            assert conn.execute("SELECT count(*) FROM toolgate.outbox").fetchone() == (0,)  # all sent, all pruned
        assert pruned == ROWS
        items: Counter[bytes] = Counter()
        for msg in published(settings, (0, 1)):
            assert sealer.mac_ok(topic, msg.value() or b"", msg.headers()), "the relay seals what it publishes"
            batch = codec().decode(msg.value() or b"", StageBatch)
            assert all(int(item.split(b"-")[1]) % 2 == msg.partition() for item in batch.items)
            items.update(batch.items)
        assert len(items) == ROWS and max(items.values()) == 1


def test_a_row_the_broker_will_never_take_is_dead_lettered_and_blocks_nothing(postgres: Server, broker: Broker) -> None:
    with scratch(postgres, broker) as settings:
        # the middle one is beyond any broker's limit
        enqueue(settings, [(0, payload) for payload in (b"before", b"x" * 2_000_000, b"after")])

        async def relay() -> int:
            relay = OutboxRelay(None, settings)
            await relay.pool.open()
            try:
                return await relay.relay_once()
            finally:
                await relay.close()

        assert asyncio.run(relay()) == 3
        with psycopg.connect(settings.database_url) as conn:
            states = conn.execute(
                "SELECT length(payload), sent_at IS NOT NULL, failed_at IS NOT NULL FROM toolgate.outbox ORDER BY id"
            ).fetchall()
        assert states == [(6, True, False), (2_000_000, True, True), (5, True, False)]
        delivered = [
            item for msg in published(settings, (0,)) for item in codec().decode(msg.value() or b"", StageBatch).items
        ]
        assert set(delivered) == {b"before", b"after"}  # at least once (consumers are idempotent), nothing lost
        from toolgate.ops.dlq import read_all

        letters = eventually(
            lambda: [f.letter for f in read_all(settings) if f.genuine and f.letter.stage == "outbox-relay"]
        )
        assert [(d.source_topic, len(d.value) > 500_000, "not delivered" in d.reason) for d in letters] == [
            ("results", True, True)
        ]


def test_a_held_row_is_left_to_its_writer_until_its_hold_ends(postgres: Server, broker: Broker) -> None:
    """Execution publishes its results' rows itself once committed: the relay is not woken for
    them and does not claim them while they are held, and takes them as a crash left them when
    the hold ends. A row that is due now still wakes it."""
    with scratch(postgres, broker) as settings:
        topics = Topics(settings.topic_prefix)

        async def run() -> tuple[list[int], list[int], int, int, bool, bool]:
            relay = OutboxRelay(None, settings)
            await relay.pool.open()
            listener = await psycopg.AsyncConnection.connect(settings.database_url, autocommit=True)
            await listener.execute("LISTEN toolgate_outbox")
            try:
                async with await psycopg.AsyncConnection.connect(settings.database_url) as conn:
                    held = [OutboxRow("results", 0, RowKind.ITEM, None, b"held-%d" % i) for i in range(3)]
                    ids = [row[0] for row in await (await outbox.enqueue_held(conn, held, topics, 1.0)).fetchall()]
                    await conn.commit()
                    woken_by_held = await _notified(listener)
                    too_early = await relay.relay_once()
                    await asyncio.sleep(1.2)
                    after_hold = await relay.relay_once()
                    await outbox_rows.enqueue(conn, [OutboxRow("results", 1, RowKind.ITEM, None, b"due")], topics)
                    await conn.commit()
                    woken_by_due = await _notified(listener)
                sent = [
                    r[0]
                    for r in await (
                        await listener.execute("SELECT id FROM toolgate.outbox WHERE sent_at IS NOT NULL ORDER BY id")
                    ).fetchall()
                ]
                return ids, sent, too_early, after_hold, woken_by_held, woken_by_due
            finally:
                await listener.close()
                await relay.close()

        ids, sent, too_early, after_hold, woken_by_held, woken_by_due = asyncio.run(run())
        assert len(ids) == 3 and not woken_by_held and woken_by_due
        assert (too_early, after_hold) == (0, 3) and sent == ids
        delivered = [
            item for msg in published(settings, (0,)) for item in codec().decode(msg.value() or b"", StageBatch).items
        ]
        assert sorted(delivered) == [b"held-0", b"held-1", b"held-2"]


async def _notified(listener: psycopg.AsyncConnection[Any], wait_s: float = 0.5) -> bool:
    """Whether a notification came to `listener` within `wait_s`."""
    async for _ in listener.notifies(timeout=wait_s, stop_after=1):
        return True
    return False
