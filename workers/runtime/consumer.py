"""A stage's consumer: its group membership, the records fetched for its rounds, and the offsets
it may commit.

confluent-kafka (librdkafka) fetches, heartbeats and commits in threads of its own. Waiting for
records is the only call that blocks; it runs in one thread of this consumer while the event
loop goes on, and it returns as soon as a record has arrived (then takes, without waiting, what
else is already fetched). On the embedded broker a record went from produce to consume sooner
this way than through Faust (docs/performance.md, "Figures behind the code"); and a record cost
no task of its own.

Offsets are stored only for the records of a finished round (`done`), whose outputs the broker
acknowledged, and librdkafka commits what is stored every second, on a rebalance and at close.
So a round that did not finish is consumed again, by this worker or the next one.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from toolgate.kafka_security import client_config
from toolgate.settings import Settings
from toolgate.topics import consumed
from toolgate.workers.runtime.filling import Bounds
from toolgate.workers.runtime.naps import Naps

log = logging.getLogger("toolgate.worker")

IDLE_WAIT_S = 1.0  # the longest one wait for records lasts (and so a shutdown waits for it)
# Napping (settings `idle_nap_ms`, on a broker that does not answer a waiting fetch early): a
# consumer that got no record for IDLE_AFTER_S naps (workers/runtime/naps.py). 30 s: an agent's
# calls seconds apart (a model thinking between them) find the stages awake.
IDLE_AFTER_S = 30.0
# How long librdkafka waits to fetch again while records it fetched are not yet taken: at most
# this much is added to a hop (librdkafka's default, 1 s, would idle a busy stage's partitions).
FETCH_QUEUE_BACKOFF_MS = 10


class StageConsumer:
    """Subscribes the group `group` to `bounds`' topics (physical names)."""

    def __init__(
        self,
        settings: Settings,
        group: str,
        bounds: dict[str, Bounds],
        on_assigned: Callable[[], None],
        woken: bool = False,
    ) -> None:
        """`woken`: a Listener calls `wake` when a record comes for every topic of `bounds`, so
        its naps may be long (settings `woken_nap_ms`, on any broker: wakeup.py, `woken`)."""
        self.bounds = bounds
        self.pending: dict[str, deque[consumed.Read]] = {topic: deque() for topic in bounds}
        self.on_assigned = on_assigned
        self._poll_records = min(b.poll_records for b in bounds.values())
        nap_s = settings.idle_nap_ms / 1000.0
        self._nap_s = max(nap_s, settings.woken_nap_ms / 1000.0) if woken else nap_s
        self._last_record = time.monotonic()
        # When the wait for records in flight began (0: none is): what liveness watches.
        self.waiting_since = 0.0
        self._consumer = Consumer(
            {
                **client_config(settings),
                "bootstrap.servers": settings.kafka_bootstrap,
                "group.id": group,
                "client.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": True,
                "auto.commit.interval.ms": 1000,
                "enable.auto.offset.store": False,
                # Cooperative rebalancing: a worker that joins or leaves (two workers a stage, one
                # killed, a broker's failover) moves only the partitions that change owner, and
                # the others keep flowing meanwhile; with the eager default every partition of the
                # group stopped and was reassigned. `_revoked` drops only what moved.
                "partition.assignment.strategy": "cooperative-sticky",
                "session.timeout.ms": int(settings.session_timeout_s * 1000),
                "heartbeat.interval.ms": int(settings.heartbeat_interval_s * 1000),
                # librdkafka refuses a poll interval shorter than the session timeout.
                "max.poll.interval.ms": int(max(settings.max_poll_interval_s, settings.session_timeout_s) * 1000),
                # How long the broker may hold a fetch that finds nothing: short, so that a record
                # arriving while it waits is not held behind it (the embedded broker does not
                # always answer a waiting fetch early).
                "fetch.wait.max.ms": settings.fetch_wait_ms,
                # librdkafka fetches again only once what it fetched was taken: the records a
                # stage holds ahead are its pending queues (bounded by `buffer_records`, `take`).
                # A stage busy with a round thus leaves its records to gather at the broker and
                # takes them in one fetch, not a fetch of a record or two as each arrives; every
                # fetch that finds records costs the embedded broker a listing of its partition.
                # Against a few rounds' worth fetched ahead, the broker spent less CPU a call at
                # 300 calls/s and p99 at 1,000 calls/s was lower; at full speed no change
                # (docs/performance.md, "Figures behind the code").
                "queued.min.messages": 1,
                "queued.max.messages.kbytes": max(4 * settings.batch_bytes // 1024, 1024),
                "fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS,
            },
            logger=logging.getLogger("kafka.consumer"),
        )
        self._naps = Naps(self._consumer, self._nap_s)
        self._consumer.subscribe(list(bounds), on_assign=self._assigned, on_revoke=self._revoked)
        self._waiter = ThreadPoolExecutor(1, thread_name_prefix="consumer-wait")

    # --- fetching ---------------------------------------------------------------------------

    async def wait(self, timeout_s: float = IDLE_WAIT_S) -> None:
        """Wait up to `timeout_s` for a record, unless one is pending already; then take what
        else has been fetched."""
        if not self.has_pending():
            loop = asyncio.get_running_loop()
            self.waiting_since = now = time.monotonic()
            napping = self._nap_s > 0 and now - self._last_record >= IDLE_AFTER_S
            look = self._naps.nap if napping else self._poll
            if napping:
                timeout_s = max(timeout_s, self._nap_s)
            try:
                first = await loop.run_in_executor(self._waiter, look, timeout_s)
            finally:
                self.waiting_since = 0.0
            if first is not None:
                self._queue([first])
        self.take()

    def wake(self) -> None:
        """Look now, from any thread: a record came for this consumer's topics (wakeup.py). A
        consumer not napping skips its next nap."""
        self._naps.wake()

    def _poll(self, timeout_s: float) -> Message | None:
        """Wait for a record, every partition fetching (a nap may have left them paused)."""
        self._naps.resume()
        return self._consumer.poll(timeout_s)

    def take(self) -> None:
        """Move what librdkafka has fetched onto the pending queues, without waiting, as far as
        their bounds allow."""
        if any(len(self.pending[topic]) >= b.buffer_records for topic, b in self.bounds.items()):
            return
        self._queue(self._consumer.consume(self._poll_records, 0))

    def has_pending(self) -> bool:
        return any(self.pending.values())

    def ready(self) -> list[str]:
        """The topics with records pending."""
        return [topic for topic, queue in self.pending.items() if queue]

    def _queue(self, messages: Sequence[Message]) -> None:
        """Queue fetched records for their rounds. Nothing a record holds raises here: a record
        whose parts cannot all be read is queued as it is (topics/consumed.py), for its round's intake to
        dead-letter, and its offset goes with the round's. Any record keeps the stage awake (a
        stage busy with what it took ahead never waits, and must not nap once it is done)."""
        if messages:
            self._last_record = time.monotonic()
        for msg in messages:
            error = msg.error()
            if error is None:
                record = consumed.read(msg)  # the one guarded reader: it never raises
                self.pending[record.topic].append(record)
            elif error.fatal():
                raise KafkaException(error)
            elif error.code() != KafkaError._PARTITION_EOF:
                log.warning("consumer error", extra={"action": "consumer_error", "error": error.str()})

    # --- offsets ----------------------------------------------------------------------------

    def done(self, topic: str, records: Sequence[consumed.Read]) -> None:
        """Store the offsets past `records` of `topic` (a finished round): librdkafka commits them."""
        last: dict[int, int] = {}
        for rec in records:
            last[rec.partition] = max(last.get(rec.partition, -1), rec.offset)
        offsets = [TopicPartition(topic, partition, offset + 1) for partition, offset in last.items()]
        try:
            self._consumer.store_offsets(offsets=offsets)
        except KafkaException as exc:  # revoked meanwhile: the new owner consumes them again
            log.info("offsets not stored", extra={"action": "offsets_not_stored", "error": str(exc)})

    # --- the group --------------------------------------------------------------------------

    def _assigned(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._naps.assigned(partitions)
        log.info("partitions assigned", extra={"action": "assigned", "count": len(partitions)})
        self.on_assigned()

    def _revoked(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Records of a revoked partition go to its next owner: drop the ones still pending."""
        gone = {(tp.topic, tp.partition) for tp in partitions}
        self._naps.revoked(gone)
        for topic, queue in self.pending.items():
            kept = [rec for rec in queue if (topic, rec.partition) not in gone]
            if len(kept) != len(queue):
                self.pending[topic] = deque(kept)
        log.info("partitions revoked", extra={"action": "revoked", "count": len(partitions)})

    def close(self) -> None:
        """Commit what is stored and leave the group."""
        self._naps.close()  # a nap ends now
        self._waiter.shutdown(wait=True)
        self._consumer.close()
