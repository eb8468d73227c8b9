"""Several outbox relays, one outbox: every row is published once, then marked sent, then pruned.

Runs two relays side by side (as two relay processes would) against a scratch database and
a topic catalog under its own prefix on the session's broker.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
import uuid
from collections import Counter

import psycopg
from confluent_kafka import Consumer, TopicPartition

from toolgate.integrity import Sealer, deployment_keys
from toolgate.ops.migrate import migrate
from toolgate.schemas.codec import codec
from toolgate.schemas.models import StageBatch
from toolgate.settings import Settings
from toolgate.topics.catalog import Topics, provision
from toolgate.workers.outbox.relay import OutboxRelay
from toolgate.workers.runtime.outbox import INSERT

from ..conftest import Pipeline

ROWS = 3000


def test_two_relays_publish_each_row_once_and_prune(pipeline: Pipeline) -> None:
    database = f"tg_relay_{uuid.uuid4().hex[:8]}"
    pipeline.sql(f"CREATE DATABASE {database}")
    url = pipeline.database_url.rsplit("/", 1)[0] + f"/{database}"
    prefix = f"relay{uuid.uuid4().hex[:6]}."
    try:
        migrate(url)
        bootstrap = pipeline.runtime["kafka_bootstrap"]
        provision(bootstrap, 2, prefix)
        topic = Topics(prefix).results
        rows = [
            {
                "topic": topic,
                "partition": i % 2,
                "kind": "item",
                "key": None,
                "payload": base64.b64encode(f"item-{i}".encode()).decode(),
                "headers": [],
            }
            for i in range(ROWS)
        ]
        with psycopg.connect(url, autocommit=True) as conn:
            for chunk in range(0, ROWS, 500):
                conn.execute(INSERT, (json.dumps(rows[chunk : chunk + 500]),))
        settings = Settings(kafka_bootstrap=bootstrap, database_url=url, topic_prefix=prefix, home=pipeline.home)
        sealer = Sealer(deployment_keys(settings), Topics(prefix))

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
                await relay.pool.close()
            return [*moved, pruned]

        first, second, pruned = asyncio.run(drain())
        assert first + second == ROWS and first > 0 and second > 0  # both took part, no row twice
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT count(*) FROM toolgate.outbox").fetchone() == (0,)  # all sent, all pruned
        assert pruned == ROWS
        items: Counter[bytes] = Counter()
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"relay-test-{uuid.uuid4().hex[:6]}"})
        consumer.assign([TopicPartition(topic, p, 0) for p in (0, 1)])
        idle = time.monotonic()
        while time.monotonic() - idle < 3.0:
            for msg in consumer.consume(500, 0.2):
                if not msg.error():
                    idle = time.monotonic()
                    assert sealer.mac_ok(topic, msg.value() or b"", msg.headers()), "the relay seals what it publishes"
                    batch = codec().decode(msg.value() or b"", StageBatch)
                    assert all(int(item.split(b"-")[1]) % 2 == msg.partition() for item in batch.items)
                    items.update(batch.items)
        consumer.close()
        assert len(items) == ROWS and max(items.values()) == 1
    finally:
        pipeline.sql(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")


def test_a_row_the_broker_will_never_take_is_dead_lettered_and_blocks_nothing(pipeline: Pipeline) -> None:
    database = f"tg_relay_{uuid.uuid4().hex[:8]}"
    pipeline.sql(f"CREATE DATABASE {database}")
    url = pipeline.database_url.rsplit("/", 1)[0] + f"/{database}"
    prefix = f"relay{uuid.uuid4().hex[:6]}."
    try:
        migrate(url)
        bootstrap = pipeline.runtime["kafka_bootstrap"]
        provision(bootstrap, 2, prefix)
        topics = Topics(prefix)
        rows = [
            {
                "topic": topics.results,
                "partition": 0,
                "kind": "item",
                "key": None,
                "payload": base64.b64encode(payload).decode(),
                "headers": [],
            }
            for payload in (b"before", b"x" * 2_000_000, b"after")  # the middle one is beyond any broker's limit
        ]
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(INSERT, (json.dumps(rows),))
        settings = Settings(kafka_bootstrap=bootstrap, database_url=url, topic_prefix=prefix, home=pipeline.home)

        async def relay() -> int:
            relay = OutboxRelay(None, settings)
            await relay.pool.open()
            try:
                return await relay.relay_once()
            finally:
                await relay.pool.close()

        assert asyncio.run(relay()) == 3
        with psycopg.connect(url) as conn:
            states = conn.execute(
                "SELECT length(payload), sent_at IS NOT NULL, failed_at IS NOT NULL FROM toolgate.outbox ORDER BY id"
            ).fetchall()
        assert states == [(6, True, False), (2_000_000, True, True), (5, True, False)]
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"relay-test-{uuid.uuid4().hex[:6]}"})
        consumer.assign([TopicPartition(topics.results, 0, 0)])
        delivered: list[bytes] = []
        idle = time.monotonic()
        while time.monotonic() - idle < 3.0:
            for msg in consumer.consume(500, 0.2):
                if not msg.error():
                    idle = time.monotonic()
                    delivered += codec().decode(msg.value() or b"", StageBatch).items
        consumer.close()
        assert set(delivered) == {b"before", b"after"}  # at least once (consumers are idempotent), nothing lost
        from toolgate.ops.dlq import read_all

        letters = [f.letter for f in read_all(settings) if f.genuine and f.letter.stage == "outbox-relay"]
        assert [(d.source_topic, len(d.value) > 500_000, "not delivered" in d.reason) for d in letters] == [
            ("results", True, True)
        ]
    finally:
        pipeline.sql(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
