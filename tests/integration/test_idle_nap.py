"""An idle stage consumer that naps (settings `idle_nap_ms`, workers/runtime/naps.py) loses
no record and keeps none past its nap: records produced at random moments, during naps and looks
alike, while a second worker joins the group and its partitions move, all reach a worker, each
in its partition's order, and none later than a nap and a look after it was produced (a resumed
partition that librdkafka fetched only when its broker thread next woke kept records 1-7 s).

On the session's broker, a topic catalog of this module's own; a nap of 100 ms after 0.2 s
idle, so that the records meet many naps.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from dataclasses import replace

import pytest
from confluent_kafka import Producer

from toolgate.ops.stack.embedded import Broker
from toolgate.settings import Settings
from toolgate.topics.catalog import Topics, stage_group
from toolgate.topics.producers import Record
from toolgate.workers.runtime import consumer as consumer_module
from toolgate.workers.runtime.consumer import StageConsumer
from toolgate.workers.runtime.filling import bounds_for
from toolgate.workers.runtime.naps import Naps
from toolgate.workers.runtime.producer import StageProducer
from toolgate.workers.runtime.wakeup import QUIET_S, Announcer, Listener

from .conftest import Database, with_topics

RECORDS = 30
NAP_MS = 100


class Counted:
    """The naps of every consumer, and their looks: each time paused partitions were fetched
    again (workers/runtime/naps.py)."""

    naps = 0
    looks = 0

    @classmethod
    def install(cls, monkeypatch: pytest.MonkeyPatch) -> None:
        nap, resume = Naps.nap, Naps.resume

        def counted_nap(naps: Naps, timeout_s: float):  # type: ignore[no-untyped-def]
            cls.naps += 1
            return nap(naps, timeout_s)

        def counted_resume(naps: Naps) -> None:
            cls.looks += bool(naps._paused)
            resume(naps)

        monkeypatch.setattr(Naps, "nap", counted_nap)
        monkeypatch.setattr(Naps, "resume", counted_resume)


@pytest.fixture
def settings(database: Database, broker: Broker, topic_prefix: str, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Consumers that nap NAP_MS after 0.2 s without a record, their naps and looks counted."""
    monkeypatch.setattr(consumer_module, "IDLE_AFTER_S", 0.2)
    Counted.install(monkeypatch)
    return replace(with_topics(database, broker, topic_prefix), idle_nap_ms=NAP_MS, fetch_wait_ms=5)


def test_a_napping_consumer_loses_no_record_while_records_come_at_random_and_a_worker_joins(
    settings: Settings, topic_prefix: str
) -> None:
    topic = Topics(topic_prefix).validated
    group = stage_group(topic_prefix, "nap-test")
    received: dict[int, list[int]] = {}  # partition -> the values, in the order they came
    produced: dict[int, float] = {}  # value -> when it was handed to the broker
    late: dict[int, float] = {}  # value -> seconds from produced to taken, at its first coming
    joined: list[float] = []  # when the second worker joined, and when it was first assigned

    def every_one() -> bool:
        return len({v for vs in received.values() for v in vs}) == RECORDS

    async def work(worker: StageConsumer, until: float) -> None:
        while time.monotonic() < until and not every_one():
            await worker.wait(0.1)  # a wait after 0.2 s without a record naps
            for name in worker.ready():
                records = list(worker.pending[name])
                worker.pending[name].clear()
                for record in records:
                    value = int(record.value or b"-1")
                    late.setdefault(value, time.monotonic() - produced[value])
                    received.setdefault(record.partition, []).append(value)
                worker.done(name, records)

    assigned = threading.Event()

    def produce() -> None:
        assigned.wait(30)  # records from the first assignment on: a group's first join is not a nap
        producer = Producer({"bootstrap.servers": settings.kafka_bootstrap, "linger.ms": 0})
        for n in range(RECORDS):
            time.sleep(random.uniform(0.0, 0.5))  # idle past IDLE_AFTER_S often: naps begin
            produced[n] = time.monotonic()
            producer.produce(topic, key=str(n % 7).encode(), value=str(n).encode())
            producer.flush(10)
        producer.flush(10)

    async def run() -> None:
        bounds = {topic: bounds_for(True, settings.batch_max, settings.stream_buffer)}
        workers = [StageConsumer(settings, group, bounds, assigned.set)]
        sending = threading.Thread(target=produce)
        sending.start()
        until = time.monotonic() + 0.5 * RECORDS + 10.0
        try:
            working = asyncio.ensure_future(work(workers[0], until))
            while len(produced) < RECORDS // 2 and time.monotonic() < until:
                await asyncio.sleep(0.05)
            # Halfway: a second worker joins (a consumer joins its group as it is made), and
            # partitions move to it.
            joined.append(time.monotonic())
            workers.append(StageConsumer(settings, group, bounds, lambda: joined.append(time.monotonic())))
            await asyncio.gather(working, work(workers[1], until))
        finally:
            sending.join()
            for worker in workers:
                worker.close()

    asyncio.run(run())
    values = sorted(v for vs in received.values() for v in vs)
    assert sorted(set(values)) == list(range(RECORDS)), f"lost: {sorted(set(range(RECORDS)) - set(values))}"
    for partition, seen in received.items():
        firsts = list(dict.fromkeys(seen))  # a record consumed again after a move comes again in order
        assert firsts == sorted(firsts), (partition, seen)
    assert Counted.naps > 10
    # A nap, a look and the machine's slack; but a record in flight while the group rebalanced
    # (produced before the second worker's last assignment, or before the end if every record
    # was taken before it was assigned, and taken after it joined) may wait for the rebalance,
    # however many there are: seconds on a busy machine.
    rebalanced = joined[-1] if len(joined) > 1 else float("inf")
    slow = sorted((round(seconds, 2), value) for value, seconds in late.items() if seconds > NAP_MS / 1000 + 0.35)
    held = [(s, v) for s, v in slow if produced[v] < rebalanced and produced[v] + s > joined[0] and s < 20]
    assert slow == held, (slow, joined)


def test_a_woken_consumer_naps_for_seconds_and_takes_a_stage_s_record_at_once(
    settings: Settings, topic_prefix: str
) -> None:
    # workers/runtime/wakeup.py: a stage that delivers a record after a quiet spell says so on a
    # Postgres channel, and a consumer that only stages feed, napping seconds at a time,
    # looks at once.
    topic = Topics(topic_prefix).executable  # not the topic the test before filled
    bounds = {topic: bounds_for(True, settings.batch_max, settings.stream_buffer)}
    assigned = threading.Event()
    Counted.naps = 0
    consumer = StageConsumer(settings, stage_group(topic_prefix, "woken-test"), bounds, assigned.set, woken=True)
    Listener(settings.database_url, [topic], consumer.wake)
    late: list[float] = []

    async def run() -> None:
        producer = StageProducer(settings, "woken-test", Announcer(settings.database_url).delivered)
        producer.start(asyncio.get_running_loop())
        await producer.warm()  # connected before the first record: a connection is not a nap

        async def consume(until: float) -> None:
            while time.monotonic() < until and len(late) < 5:
                await consumer.wait()
                for name in consumer.ready():
                    records = list(consumer.pending[name])
                    consumer.pending[name].clear()
                    late.extend(time.monotonic() - float(record.value or b"0") for record in records)
                    consumer.done(name, records)

        consuming = asyncio.ensure_future(consume(time.monotonic() + 60))
        await asyncio.to_thread(assigned.wait, 30)
        for _ in range(5):
            await asyncio.sleep(QUIET_S + 1.0)  # asleep by now, and each record after a quiet spell
            await (await producer.send(Record(topic, b"k", str(time.monotonic()).encode(), [])))
        await consuming
        producer.close()

    try:
        asyncio.run(run())
    finally:
        consumer.close()
    assert len(late) == 5 and Counted.naps >= 5, (late, Counted.naps)
    # Each came within a look of its notice, not at the end of a nap of seconds.
    assert max(late) < settings.woken_nap_ms / 1000 / 5, late


def test_an_idle_consumer_looks_only_when_a_log_reaches_past_what_it_read(
    settings: Settings, topic_prefix: str
) -> None:
    # Between naps it asks where its partitions' logs end, and fetches only if one reaches past
    # its position (a consumer that read records), or past its group's committed offset (a
    # consumer that read nothing since it came): seconds of naps with nothing new, no look;
    # a record produced meanwhile is still taken within a nap and a look.
    topic = Topics(topic_prefix).results  # not a topic the tests before filled
    bounds = {topic: bounds_for(True, settings.batch_max, settings.stream_buffer)}
    group = stage_group(topic_prefix, "looking-test")
    producer = Producer({"bootstrap.servers": settings.kafka_bootstrap, "linger.ms": 0})

    def produce(values: range) -> float:
        for n in values:
            producer.produce(topic, key=str(n).encode(), value=str(n).encode())
        producer.flush(10)
        return time.monotonic()

    async def consume(worker: StageConsumer, wanted: int, for_s: float) -> list[int]:
        taken: list[int] = []
        until = time.monotonic() + for_s
        while time.monotonic() < until and len(taken) < wanted:
            await worker.wait(0.1)
            for name in worker.ready():
                records = list(worker.pending[name])
                worker.pending[name].clear()
                taken.extend(int(record.value or b"-1") for record in records)
                worker.done(name, records)
        return taken

    def idle_then_one(worker: StageConsumer, value: int) -> tuple[int, float]:
        """The looks of 3 s of naps with nothing new, and how late a record then came."""
        Counted.looks = 0
        assert asyncio.run(consume(worker, 1, 3.0)) == []
        looks = Counted.looks
        produced = produce(range(value, value + 1))
        assert asyncio.run(consume(worker, 1, 10.0)) == [value]
        return looks, time.monotonic() - produced

    produce(range(3))
    first = StageConsumer(settings, group, bounds, lambda: None)
    try:
        assert sorted(asyncio.run(consume(first, 3, 30.0))) == [0, 1, 2]
        read_some = idle_then_one(first, 3)
        time.sleep(1.5)  # its offsets committed (every second)
    finally:
        first.close()
    second = StageConsumer(settings, group, bounds, lambda: None)  # from the committed offsets
    try:
        assert asyncio.run(consume(second, 1, 3.0)) == []  # assigned, caught up, napping
        read_none = idle_then_one(second, 4)
    finally:
        second.close()
    for looks, late in (read_some, read_none):
        assert looks == 0, (read_some, read_none)
        assert late < NAP_MS / 1000 + 0.5, (read_some, read_none)
