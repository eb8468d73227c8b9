"""A stage makes its producers, with the cluster's metadata, and its topics' keys as it starts,
not in the round of its first call (workers/runtime/producer.py `warm`, workers/runtime/app.py).

Measured on `toolgate up` (its records' timestamps), the first call after a start went through
the stages in 84-108 ms against 21-27 for the next ones, each stage's first round paying for what
it made once: a producer, its connection and metadata, MAC keys, the contracts' compiled
validators (validation's round 15 ms against 2.4). Made as the stage starts: 45-50 ms."""

from __future__ import annotations

import asyncio
import time

from toolgate.ops.stack.embedded import Broker
from toolgate.settings import Settings
from toolgate.topics.catalog import CATALOG, Topics
from toolgate.topics.producers import Record
from toolgate.workers.runtime.producer import IDLE_S, StageProducer

from .conftest import fresh_topics


def test_warm_makes_every_producer_and_names_the_cluster_s_topics(broker: Broker) -> None:
    prefix = fresh_topics(broker, "warm-")
    settings = Settings(kafka_bootstrap=broker.bootstrap, topic_prefix=prefix, compression="lz4")
    topics = Topics(prefix)

    async def scenario() -> list[str]:
        producer = StageProducer(settings, "warm-test")
        producer.start(asyncio.get_running_loop())
        names = await producer.warm()
        # Both producers now made: the compressing one and the plain one; each takes a record.
        assert producer.codecs_made() == ["lz4", "none"]
        for logical in ("validated", "deadletter"):
            delivered = await producer.send(Record(topics.name(logical), b"key", b"value", [], 0))
            await asyncio.wait_for(delivered, 10)
        await asyncio.to_thread(producer.close)
        return names

    names = asyncio.run(scenario())
    assert {topics.name(spec.logical) for spec in CATALOG if not spec.per_tenant} <= set(names)


def test_without_a_cluster_the_wait_is_left_to_the_first_record() -> None:
    settings = Settings(kafka_bootstrap="127.0.0.1:9", topic_prefix="nowhere.")

    async def scenario() -> list[str]:
        producer = StageProducer(settings, "warm-test")
        producer.start(asyncio.get_running_loop())
        names = await producer.warm(timeout_s=0.5)
        await asyncio.to_thread(producer.close, 0.0)
        return names

    assert asyncio.run(scenario()) == []


def test_an_idle_report_thread_sleeps_until_a_record_wakes_it(broker: Broker) -> None:
    """With nothing in flight the report thread waits on `send`, not on librdkafka's poll (which
    wakes five times a second): a record handed over to a sleeping thread is acknowledged at once,
    not after the thread's idle sleep (`IDLE_S`), and a sleeping thread stops at once."""
    prefix = fresh_topics(broker, "idle-")
    settings = Settings(kafka_bootstrap=broker.bootstrap, topic_prefix=prefix, compression="lz4")
    topic = Topics(prefix).name("validated")

    async def scenario() -> tuple[list[float], float]:
        producer = StageProducer(settings, "idle-test")
        producer.start(asyncio.get_running_loop())
        await producer.warm()
        await asyncio.wait_for(await producer.send(Record(topic, b"key", b"first", [], 0)), 10)
        took = []
        for i in range(3):
            await asyncio.sleep(IDLE_S * 1.1)  # nothing in flight: the thread sleeps
            started = time.monotonic()
            await asyncio.wait_for(await producer.send(Record(topic, b"key", b"%d" % i, [], 0)), 10)
            took.append(time.monotonic() - started)
        await asyncio.sleep(IDLE_S * 0.2)
        started = time.monotonic()
        await asyncio.to_thread(producer.close)
        return took, time.monotonic() - started

    took, closing = asyncio.run(scenario())
    assert max(took) < IDLE_S / 2, took
    assert closing < IDLE_S / 2, closing
