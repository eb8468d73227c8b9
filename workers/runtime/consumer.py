"""A stage's consumer: its group membership, the records fetched for its rounds, and the offsets
it may commit.

confluent-kafka (librdkafka) fetches, heartbeats and commits in threads of its own. Waiting for
records is the only call that blocks; it runs in one thread of this consumer while the event
loop goes on, and it returns as soon as a record has arrived (then takes, without waiting, what
else is already fetched). Measured on the embedded broker, a record went from produce to consume
in 2.5 ms this way, against 4.1-4.6 ms through Faust; and a record cost no task of its own.

Offsets are stored only for the records of a finished round (`done`), whose outputs the broker
acknowledged, and librdkafka commits what is stored every second, on a rebalance and at close.
So a round that did not finish is consumed again, by this worker or the next one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from toolgate.kafka_security import client_config
from toolgate.settings import Settings
from toolgate.topics import consumed
from toolgate.topics.headers import as_pairs
from toolgate.workers.runtime.filling import Bounds
from toolgate.workers.runtime.intake import RawRecord

log = logging.getLogger("toolgate.worker")

IDLE_WAIT_S = 1.0  # the longest one wait for records lasts (and so a shutdown waits for it)
# Napping (settings `idle_nap_ms`, on a broker that does not answer a waiting fetch early): a
# consumer that got no record for IDLE_AFTER_S pauses its partitions for a nap, then fetches
# again for LOOK_S (a fetch answered at once if records wait, and one held for the short fetch
# wait if none do), and naps again. A record that arrives at a napping stage waits out the rest
# of the nap; once one came, the stage fetches without napping until it is idle again. 30 s: an
# agent's calls seconds apart (a model thinking between them) find the stages awake. A look of
# 25 ms: woken at once (`_resume`), the fetcher brought a waiting record in 1-14 ms on Tansu, and
# each look costs a fetch every 5 ms (a look of 50 ms, with naps of 500 ms, left an idle stage
# fetching ~18 times a second). A stage fed only by stages (and toolgate's own approvers' tools)
# is woken when a record comes for it (workers/runtime/wakeup.py), and naps WOKEN_NAP_S.
IDLE_AFTER_S = 30.0
LOOK_S = 0.025
# The nap of a consumer that a Listener wakes when a record comes for it (workers/runtime/
# wakeup.py): it looks this often only in case a notice was lost.
WOKEN_NAP_S = 5.0
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
        its naps may be long (WOKEN_NAP_S)."""
        self.bounds = bounds
        self.pending: dict[str, deque[RawRecord]] = {topic: deque() for topic in bounds}
        self.on_assigned = on_assigned
        self._poll_records = min(b.poll_records for b in bounds.values())
        nap_s = settings.idle_nap_ms / 1000.0
        self._nap_s = max(nap_s, WOKEN_NAP_S) if woken and nap_s > 0 else nap_s
        self._woken = threading.Event()
        self._closing = False
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
                # Alternating runs (3 pairs, against a few rounds' worth fetched ahead): broker
                # 1,436, 1,392, 1,337 µs a call at 300 calls/s against 1,603, 1,728, 1,643; p99
                # at 1,000 calls/s 241 and 286 ms against 409 and 398; at full speed no change.
                "queued.min.messages": 1,
                "queued.max.messages.kbytes": max(4 * settings.batch_bytes // 1024, 1024),
                "fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS,
            },
            logger=logging.getLogger("kafka.consumer"),
        )
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
            look = self._nap if napping else self._consumer.poll
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
        self._woken.set()

    def _nap(self, timeout_s: float) -> Message | None:
        """Nap and look, in this consumer's thread, until a record comes or `timeout_s` passed:
        no fetch for the nap (unless `wake` ends it), then a poll of LOOK_S with every partition
        fetched again from where it was. The group's callbacks are served between naps (a
        rebalance waits for at most one), and a record fetched before a pause comes back at
        once."""
        deadline = time.monotonic() + timeout_s
        while True:
            self._consumer.pause(self._consumer.assignment())
            try:
                self._woken.wait(min(self._nap_s, max(0.0, deadline - time.monotonic())))
                self._woken.clear()
                early = self._consumer.poll(0)
            finally:
                self._resume()
            found = early if early is not None else self._consumer.poll(LOOK_S)
            if found is not None or self._closing or time.monotonic() >= deadline:
                return found

    def _resume(self) -> None:
        """Fetch every assigned partition again, now. The assignment may have changed in the
        nap's rebalance callbacks: what is assigned now is resumed (a partition that came
        meanwhile was never paused). librdkafka looks at a resumed partition only when the
        broker's thread next wakes, and a resume does not wake it: on Tansu the first fetch went
        out 415-501 ms after it (five of five), so a look found nothing and a record waited for
        a look that happened to meet a fetch (seconds). A request on that connection wakes it: a
        metadata request for one assigned topic, after which the record came in 1-14 ms."""
        assigned = self._consumer.assignment()
        self._consumer.resume(assigned)
        if assigned:
            with contextlib.suppress(KafkaException):  # the broker away: the look finds nothing
                self._consumer.list_topics(assigned[0].topic, timeout=LOOK_S)

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
        whose parts cannot all be read is queued as it is (`_raw`), for its round's intake to
        dead-letter, and its offset goes with the round's. Any record keeps the stage awake (a
        stage busy with what it took ahead never waits, and must not nap once it is done)."""
        if messages:
            self._last_record = time.monotonic()
        for msg in messages:
            error = msg.error()
            if error is None:
                topic, record = _raw(msg)
                self.pending[topic].append(record)
            elif error.fatal():
                raise KafkaException(error)
            elif error.code() != KafkaError._PARTITION_EOF:
                log.warning("consumer error", extra={"action": "consumer_error", "error": error.str()})

    # --- offsets ----------------------------------------------------------------------------

    def done(self, topic: str, records: Sequence[RawRecord]) -> None:
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
        log.info("partitions assigned", extra={"action": "assigned", "count": len(partitions)})
        self.on_assigned()

    def _revoked(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Records of a revoked partition go to its next owner: drop the ones still pending."""
        gone = {(tp.topic, tp.partition) for tp in partitions}
        for topic, queue in self.pending.items():
            kept = [rec for rec in queue if (topic, rec.partition) not in gone]
            if len(kept) != len(queue):
                self.pending[topic] = deque(kept)
        log.info("partitions revoked", extra={"action": "revoked", "count": len(partitions)})

    def close(self) -> None:
        """Commit what is stored and leave the group."""
        self._closing = True
        self._woken.set()  # a nap ends now
        self._waiter.shutdown(wait=True)
        self._consumer.close()


def _raw(msg: Message) -> tuple[str, RawRecord]:
    """A fetched record (no error: its topic, partition and offset are known) and its topic,
    read through the one guarded reader (topics/consumed.py)."""
    rec = consumed.read(msg)
    if isinstance(rec, consumed.Unreadable):
        return rec.topic, RawRecord(rec.partition, rec.offset, rec.key, rec.value, unreadable=rec.reason)
    return rec.topic, RawRecord(rec.partition, rec.offset, rec.key, rec.value, as_pairs(rec.headers))
