"""A stage's producer: confluent-kafka (librdkafka), each record's acknowledgement awaitable.

librdkafka batches and sends in its own threads; what it reports back (a record acknowledged by
every in-sync replica, or failed) is served by `poll`, which a thread of this producer calls while
anything is in flight (with nothing in flight it sleeps, not polling). The reports of one poll
reach the event loop together, in one wake-up, and settle the futures `send` returned. Against
Faust's aiokafka producer on the embedded broker, an acknowledgement came back sooner, and a send
cost the event loop a fraction of what it did (docs/performance.md, "Figures behind the code").

Idempotent, with `acks=all`: on a real cluster a leader moves (a broker restarts, is killed,
is drained), and librdkafka retries what the old leader took but never acknowledged. Without
idempotence such a retry writes the records again, behind records sent since; with it the new
leader drops the copy by its sequence number, so a stage's outputs reach every partition once and
in order. Every consumer would take a duplicate harmlessly (every stage is idempotent), but each is
a round of work and a false alarm in the hop counts. The embedded Tansu keeps nothing across a
restart, producer state included; `toolgate up` restarts every stage after it (ops/stack/up.py), so no
producer outlives the broker's memory of it.

A record not acknowledged within `message.timeout.ms` (a partition without enough in-sync
replicas, NOT_ENOUGH_REPLICAS, stays retriable that long) fails its round's delivery, which tries
again with backoff (workers/runtime/delivery.py) and acks the round's input only after.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from confluent_kafka import KafkaError, Producer

from toolgate.kafka_security import client_config
from toolgate.settings import Settings
from toolgate.topics.catalog import Topics
from toolgate.topics.producers import Producers, Record, enqueue

log = logging.getLogger("toolgate.worker")

# Errors no retry can cure: the record is too large for the broker, malformed, or its topic
# cannot exist. Anything else (the broker unreachable, a leader moving) passes.
UNDELIVERABLE = frozenset(
    {
        KafkaError.MSG_SIZE_TOO_LARGE,
        KafkaError.INVALID_MSG_SIZE,
        KafkaError.INVALID_MSG,
        KafkaError.INVALID_RECORD,
        KafkaError.RECORD_LIST_TOO_LARGE,
        KafkaError.TOPIC_EXCEPTION,
    }
)
# How long one poll of the delivery reports may wait. A poll returns as soon as a report is
# served, so this bounds only how long a stopping producer's thread takes to notice: at 0.05 s
# the two report threads of an idle stage woke 40 times a second, for CPU every second
# (docs/performance.md, "Figures behind the code"). A longer one saves nothing more:
# confluent-kafka (2.13 on) waits in slices of 200 ms, taking the GIL between them, so a thread
# blocked in any poll wakes five times a second (measured, whatever the timeout).
SERVE_S = 0.5
# With nothing in flight the thread does not poll at all: it sleeps until `send` hands over a
# record, and serves what else librdkafka queues for the application (errors, logs) this often.
# Two report threads an idle stage had, polling, each took CPU every second for nothing
# (docs/performance.md, "Figures behind the code").
IDLE_S = 1.0
WARM_S = 5.0  # how long `warm` waits for the cluster's metadata
FULL_QUEUE_PAUSE_S = 0.005


def undeliverable(error: KafkaError | None) -> bool:
    return error is not None and error.code() in UNDELIVERABLE


class ProduceError(Exception):
    """A record the broker did not take, with librdkafka's error."""

    def __init__(self, error: KafkaError) -> None:
        super().__init__(error.str())
        self.error = error

    @property
    def undeliverable(self) -> bool:
        return undeliverable(self.error)


Report = tuple["asyncio.Future[None]", KafkaError | None]
Announce = Callable[[str, int], None]


class StageProducer:
    """A librdkafka producer per codec, made when first needed (topics/producers.py): one
    compresses (settings.compression), for the topics only toolgate reads; the other writes the
    edge topics others read, plain (topics/catalog.py)."""

    def __init__(self, settings: Settings, client_id: str, announce: Announce | None = None) -> None:
        """`announce(topic, partition)` is told of every record the broker acknowledged
        (workers/runtime/wakeup.py), in a report thread."""
        config = {
            **client_config(settings),
            "bootstrap.servers": settings.kafka_bootstrap,
            "client.id": client_id,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": settings.linger_ms,
            # One round's records for a partition go out as one batch.
            "batch.size": max(settings.batch_bytes * 2, 1_000_000),
            # One request in flight: what a round hands over while one is out waits for it and
            # goes in the next, as one batch a partition. Without a linger and with requests
            # unbounded, normalization's observations (a record a call) went out in many requests
            # a round, and the embedded broker keeps a batch object per partition per request and
            # lists all of a partition's objects for every fetch that finds records. On two stacks
            # side by side at full speed, one request in flight cost the broker less CPU a call and
            # ran more calls a second (docs/performance.md, "Figures behind the code"). A record
            # with nothing in flight still goes at once.
            "max.in.flight.requests.per.connection": 1,
            # The partition a key maps to, as Java clients, aiokafka and the relay map it.
            "partitioner": "murmur2_random",
            "message.timeout.ms": 30_000,
        }
        self._producers = Producers(config, Topics(settings.topic_prefix), settings.compression)
        self._served: dict[str, _Served] = {}  # by codec, as the producer each serves
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = threading.Event()
        self._announce = announce

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    async def warm(self, timeout_s: float = WARM_S) -> list[str]:
        """Make every producer now, each connected to the cluster and holding the metadata of
        every topic it has; the names of those topics. A producer otherwise comes with the
        first record that needs it, and that record waits for its connection and metadata.
        A cluster that does not answer in time leaves that wait to the first record, as before."""
        made = [self._served_for(codec) for codec in self._producers.codecs()]
        asked = [asyncio.to_thread(served.producer.list_topics, None, timeout_s) for served in made]
        names: set[str] = set()
        for answer in await asyncio.gather(*asked, return_exceptions=True):
            if isinstance(answer, BaseException):
                log.warning("no metadata yet", extra={"action": "warm", "error": str(answer)})
                continue
            names.update(answer.topics)
        return sorted(names)

    def codecs_made(self) -> list[str]:
        """The codecs of the producers made so far."""
        return sorted(self._served)

    async def send(self, record: Record) -> asyncio.Future[None]:
        """Hand one record to librdkafka; the future settles with the broker's answer."""
        return await self._served_for(self._producers.codec(record.topic)).send(record)

    async def deliver(self, records: list[Record]) -> list[KafkaError | None]:
        """Produce every record and wait for every answer: each one's error, None once the
        broker acknowledged it (the outbox relay's way to send)."""
        futures = [await self.send(record) for record in records]
        errors: list[KafkaError | None] = []
        for answer in await asyncio.gather(*futures, return_exceptions=True):
            if isinstance(answer, BaseException) and not isinstance(answer, ProduceError):
                raise answer  # not the broker's answer: nothing is known of the record
            errors.append(answer.error if isinstance(answer, ProduceError) else None)
        return errors

    def _served_for(self, codec: str) -> _Served:
        """The producer of `codec` and its report thread, made when first asked for."""
        if self._loop is None:  # not started by a stage: the loop of its first send
            self._loop = asyncio.get_running_loop()
        served = self._served.get(codec)
        if served is None:
            producer = self._producers.for_codec(codec)
            served = self._served[codec] = _Served(producer, self._loop, self._stopping, self._announce)
        return served

    def close(self, timeout_s: float = 10.0) -> int:
        """Wait up to `timeout_s` for what is queued to be acknowledged; the count still queued."""
        self._stopping.set()
        deadline = time.monotonic() + timeout_s
        return sum(served.close(max(0.0, deadline - time.monotonic())) for served in self._served.values())


class _Served:
    """One producer and the thread that serves its delivery reports to the event loop: the
    reports of one poll reach the loop together, in one wake-up."""

    def __init__(
        self,
        producer: Producer,
        loop: asyncio.AbstractEventLoop,
        stopping: threading.Event,
        announce: Announce | None = None,
    ) -> None:
        self.producer = producer
        self._announce = announce
        self._loop = loop
        self._reports: list[Report] = []
        self._queued = threading.Event()  # set by `send`: a record may be in flight
        self._thread = threading.Thread(target=self._serve, args=(stopping,), name="producer-reports", daemon=True)
        self._thread.start()

    async def send(self, record: Record) -> asyncio.Future[None]:
        fut: asyncio.Future[None] = self._loop.create_future()
        report = partial(self._report, fut)
        while True:
            try:
                refused = enqueue(self.producer, record, report)
                break
            except BufferError:  # librdkafka's queue is full: wait for acknowledgements to drain it
                await asyncio.sleep(FULL_QUEUE_PAUSE_S)
        if refused is not None:  # refused before it was queued (too large, unknown topic)
            fut.set_exception(ProduceError(refused))
        elif not self._queued.is_set():
            self._queued.set()
        return fut

    def _report(self, fut: asyncio.Future[None], err: KafkaError | None, msg: Any) -> None:
        self._reports.append((fut, err))  # called in the serving thread, inside poll()
        if err is None and self._announce is not None:
            self._announce(msg.topic(), msg.partition())

    def _serve(self, stopping: threading.Event) -> None:
        loop = self._loop
        while not stopping.is_set():
            if len(self.producer):  # records in flight, or their reports not yet served
                self.producer.poll(SERVE_S)
            else:
                self._queued.wait(IDLE_S)
                self._queued.clear()  # a record handed over since is counted by len() above
                self.producer.poll(0)
            if self._reports:
                reports, self._reports = self._reports, []
                try:
                    loop.call_soon_threadsafe(_settle, reports)
                except RuntimeError:  # the loop is closed: nobody waits any more
                    return

    def close(self, timeout_s: float) -> int:
        self._queued.set()  # a thread asleep with nothing in flight sees `stopping` at once
        self._thread.join()
        left: int = self.producer.flush(timeout_s)
        return left


def _settle(reports: list[Report]) -> None:
    for fut, err in reports:
        if fut.done():
            continue
        if err is None:
            fut.set_result(None)
        else:
            fut.set_exception(ProduceError(err))
