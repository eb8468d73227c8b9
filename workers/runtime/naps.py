"""An idle stage consumer's naps: every stage's (settings `idle_nap_ms`) on a broker that does not
answer a waiting fetch early, where a short fetch wait is a stage's latency and an idle stage
fetching every few milliseconds was most of an idle stack's CPU; and on any broker, those of the
stages that are woken when a record comes for them (settings `woken_nap_ms`).

A consumer that got no record for a while (workers/runtime/consumer.py, IDLE_AFTER_S) pauses its
partitions and naps. Between naps it asks the broker where each partition's log ends (one
ListOffsets request, `_behind`); only if a log reaches past what the consumer read does it fetch
again, for LOOK_S (a fetch answered at once if records wait, and one held for the short fetch
wait if none do). A record that arrives at a napping stage waits out the rest of the nap; once
one came, the stage fetches without napping until it is idle again. A look of 25 ms: woken at
once (`resume`), the fetcher brought a waiting record well within it on Tansu. Looking at every
nap's end cost validation (naps of 500 ms) CPU every second: the partitions paused and resumed, a
metadata request and five fetches each time; asking for the ends first costs one request
(docs/performance.md, "Figures behind the code"). A stage fed only by stages (and toolgate's own
approvers' tools) is woken when a record comes for it (workers/runtime/wakeup.py), and naps for
seconds: it looks at a nap's end only in case a notice was lost. A look that finds nothing while
a log still reaches past what was read goes on (`_look`): on a cluster of several brokers the
metadata request that wakes the fetcher may wake another broker's connection than the leader's.

Everything here runs in the consumer's own thread (its `wait`), the rebalance callbacks too.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaException, Message, TopicPartition

LOOK_S = 0.025
# How long a napping consumer waits for the broker to say where its partitions' logs end (or
# start, or where its group committed): unanswered, it looks as if they reached further.
ASK_S = 0.5

Partition = tuple[str, int]


class Naps:
    def __init__(self, consumer: Consumer, nap_s: float) -> None:
        self._consumer = consumer
        self._nap_s = nap_s
        self._woken = threading.Event()
        self._closing = False
        # What is assigned (kept by the rebalance callbacks: librdkafka's `assignment()` is a
        # request to its main thread), the partitions paused (kept so from nap to nap), and where
        # the consumer began reading each partition it has read nothing of since it came.
        self._assignment: set[Partition] = set()
        self._paused: set[Partition] = set()
        self._began: dict[Partition, int] = {}

    def nap(self, timeout_s: float) -> Message | None:
        """Nap and look until a record comes or `timeout_s` passed. The partitions stay paused
        from nap to nap (no fetch) and are fetched again for a look of LOOK_S only when `wake`
        ended a nap or a log reaches past what was read (`_behind`); a look that finds a record
        leaves them fetching. The group's callbacks are served between naps (a rebalance waits
        for at most one), and a record fetched before a pause comes back at once."""
        deadline = time.monotonic() + timeout_s
        while True:
            self._pause()
            woken = self._woken.wait(min(self._nap_s, max(0.0, deadline - time.monotonic())))
            self._woken.clear()
            found = self._consumer.poll(0)
            if found is None and (woken or self._behind()):
                found = self._look()
            if found is not None:
                self.resume()
                return found
            if self._closing or time.monotonic() >= deadline:
                return None

    def _look(self) -> Message | None:
        """Fetch again, for LOOK_S and then for as long as a log reaches past what was read (a nap
        at most): a record that waits is taken before the next nap, whenever in a nap it came. A
        resumed partition is fetched once the thread of its leader's connection wakes, and
        `resume` wakes one connection's: on a cluster of several brokers, often not the
        leader's, and a look of LOOK_S alone found nothing, the partitions were paused again,
        and the record waited for a later look, a nap (seconds) or several (10 s on the Kafka
        tier). Asking the leaders where their logs end (`_behind`) wakes theirs."""
        until = time.monotonic() + max(self._nap_s, LOOK_S)
        self.resume()
        found = self._consumer.poll(LOOK_S)
        while found is None and not self._closing and time.monotonic() < until and self._behind():
            found = self._consumer.poll(LOOK_S)
        return found

    def wake(self) -> None:
        """End the nap in progress, or skip the next one (from any thread)."""
        self._woken.set()

    def close(self) -> None:
        self._closing = True
        self._woken.set()

    def assigned(self, partitions: Iterable[TopicPartition]) -> None:
        """A partition comes fetching, read from where its group committed."""
        for tp in partitions:
            self._assignment.add((tp.topic, tp.partition))
            self._paused.discard((tp.topic, tp.partition))
            self._began.pop((tp.topic, tp.partition), None)

    def revoked(self, gone: set[Partition]) -> None:
        self._assignment -= gone
        self._paused -= gone
        for key in gone:
            self._began.pop(key, None)

    def resume(self) -> None:
        """Fetch every assigned partition again, now. librdkafka looks at a resumed partition
        only when the broker's thread next wakes, and a resume does not wake it: on Tansu the
        first fetch went out long after it, every time, so a look found nothing and a record
        waited for a look that happened to meet a fetch (seconds). A request on that connection
        wakes it: a metadata request for one assigned topic, after which the record came at once
        (docs/performance.md, "Figures behind the code")."""
        if not self._paused:
            return
        self._paused.clear()
        assigned = self._consumer.assignment()
        self._consumer.resume(assigned)
        if assigned:
            with contextlib.suppress(KafkaException):  # the broker away: the look finds nothing
                self._consumer.list_topics(assigned[0].topic, timeout=LOOK_S)

    def _pause(self) -> None:
        """Stop fetching what is assigned and not paused yet (what a rebalance brought)."""
        fresh = self._assignment - self._paused
        if fresh:
            self._consumer.pause([TopicPartition(topic, partition) for topic, partition in fresh])
            self._paused |= fresh

    def _behind(self) -> bool:
        """Whether any assigned partition's log ends past what the consumer has read: one
        ListOffsets request for the ends. Unanswered, or answered with an error, it says yes,
        and the look finds out."""
        assigned = [TopicPartition(topic, partition) for topic, partition in self._assignment]
        if not assigned:
            return False
        try:
            ends = self._consumer.offsets_for_times(
                [TopicPartition(tp.topic, tp.partition, OFFSET_END) for tp in assigned], timeout=ASK_S
            )
            read = self._read_up_to(assigned)
        except KafkaException:
            return True
        if read is None:
            return True
        return any(end.error is not None or end.offset > read[(end.topic, end.partition)] for end in ends)

    def _read_up_to(self, assigned: list[TopicPartition]) -> dict[Partition, int] | None:
        """Where the consumer reads each partition next: its position, or for a partition it
        has read nothing of since it came (no position), where it began: the group's committed
        offset, else the log's start (`auto.offset.reset` earliest). Those are asked once a
        partition's stay, and forgotten when it goes or a record of it is read. None: a
        partition's is not known (the broker did not say)."""
        read: dict[Partition, int] = {}
        unknown: list[TopicPartition] = []
        for tp in self._consumer.position(assigned):
            key = (tp.topic, tp.partition)
            if tp.offset >= 0:
                read[key] = tp.offset
                self._began.pop(key, None)
            elif key in self._began:
                read[key] = self._began[key]
            else:
                unknown.append(TopicPartition(tp.topic, tp.partition))
        if unknown:
            committed = self._consumer.committed(unknown, timeout=ASK_S)
            uncommitted = [TopicPartition(t.topic, t.partition, OFFSET_BEGINNING) for t in committed if t.offset < 0]
            starts = self._consumer.offsets_for_times(uncommitted, timeout=ASK_S) if uncommitted else []
            for tp in [*committed, *starts]:
                if tp.offset >= 0 and tp.error is None:
                    read[(tp.topic, tp.partition)] = self._began[(tp.topic, tp.partition)] = tp.offset
        known = read.keys() >= {(tp.topic, tp.partition) for tp in assigned}
        return read if known else None
