"""Partitions read to the end they have when read: what `toolgate dlq list` lists and what
`toolgate status` counts (ops/dlq.py, ops/lag.py).

A reading is over when librdkafka says each partition is at its end (`enable.partition.eof`),
not when the topic has been quiet for a while: a quiet spell proves nothing on a broker that is
slow to answer (a loaded cluster, an election), and waiting for one cost every listing its length
(docs/performance.md, "Topics read to their ends"). The end is the one each fetch
answer carries, which is right on the embedded Tansu too; the high watermark its ListOffsets
reports is not (ops/status.py), so no reading starts from it. A partition says it is at its end
on the first fetch that finds nothing past its position, which the broker holds for its fetch
wait: a reader's consumer asks for a short one (`READER_SETTINGS`).

A partition that says nothing within the reading's limit leaves it short: `ended` names the
partitions that did, and a reader says what it could not read rather than guess. A partition told
at its end goes on being read while others are not yet: what comes to it then is read too, and
where it was read to (`reached`) moves past it, so a reader that goes on from there reads nothing
twice.

A partition read from past its end (its log started over: the embedded broker came back empty, a
topic made again) is `lost`, and the reading does not wait on it. Apache Kafka says so at once where
the consumer's `auto.offset.reset` is `error` (with `earliest` it reads the partition from its
start unasked). The embedded Tansu answers such a fetch with nothing but the partition's end, so
a reading names it lost once the fetch answers told an end short of where it reads for a while
(`PastEnd`); a reader that reads on rather than to the ends reads such a partition again from its
start (`PastEnd.rewind`: the client's feed, a following listing, `wait`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from toolgate.topics import consumed

# What a consumer that reads to the ends needs, beside its connection and group: the end told,
# and a fetch that finds nothing answered after milliseconds (the broker's default holds it 500 ms).
READER_SETTINGS = {"enable.partition.eof": True, "enable.auto.commit": False, "fetch.wait.max.ms": 10}

Partition = tuple[str, int]  # (topic, partition)


# How long a partition must stay read past the end its fetch answers tell before it counts as
# lost: a new leader of an Apache Kafka partition may tell an end short of the old leader's for a
# moment, until its followers caught up with it. A log that started over stays short.
PAST_END_S = 2.0


class PastEnd:
    """Which partitions `consumer` reads past the end its fetch answers tell, and has for
    PAST_END_S: their log started over under it. The end a fetch answer carries is the true one
    on Tansu too, where ListOffsets' is not (ops/status.py); before any answer there is none, and
    nothing is past it."""

    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer
        self._since: dict[Partition, float] = {}  # when each was first seen past its end, lately

    def lost(self, key: Partition, position: int) -> bool:
        _, end = self.consumer.get_watermark_offsets(TopicPartition(*key), cached=True)
        if not 0 <= end < position:
            self._since.pop(key, None)
            return False
        now = time.monotonic()
        return now - self._since.setdefault(key, now) >= PAST_END_S

    def rewind(self, topic: str, positions: dict[int, int]) -> None:
        """Read again from its start each partition of `topic` lost, as Apache Kafka's consumer
        does unasked (`earliest`): `positions` (partition -> the next offset to read, kept by the
        reader) move there, and the consumer is assigned them."""
        lost = [p for p, at in positions.items() if self.lost((topic, p), at)]
        if lost:
            positions.update(dict.fromkeys(lost, OFFSET_BEGINNING))
            self.consumer.assign([TopicPartition(topic, p, at) for p, at in sorted(positions.items())])


@dataclass
class ToEnd:
    """The records of `starts`' partitions, each from its start offset (or OFFSET_BEGINNING) to
    its end, as they are iterated. `reached` holds where each partition was read to (past its
    last record read, or at its end once told), and `ended` the same for the partitions whose end
    was told, so a reading that stopped at `limit_s` can say which partitions it did not finish,
    and one that goes on from `reached` reads nothing twice. The consumer is left with nothing
    assigned."""

    consumer: Consumer
    starts: dict[Partition, int]
    limit_s: float
    reached: dict[Partition, int] = field(default_factory=dict)
    told: set[Partition] = field(default_factory=set)  # the partitions whose end was told
    lost: set[Partition] = field(default_factory=set)

    def __iter__(self) -> Iterator[consumed.Read]:
        if not self.starts:
            return
        self.consumer.assign([TopicPartition(t, p, offset) for (t, p), offset in self.starts.items()])
        deadline = time.monotonic() + self.limit_s
        past = PastEnd(self.consumer)
        try:
            while len(self.told) + len(self.lost) < len(self.starts) and time.monotonic() < deadline:
                msg = self.consumer.poll(0.1)
                if msg is None:
                    self._note_lost(past)
                    continue
                topic, partition, error = msg.topic(), msg.partition(), msg.error()
                if topic is None or partition is None:
                    continue  # an error of the client's own, not of a partition
                key = (topic, partition)
                if error is None:
                    record = consumed.read(msg)
                    self.reached[key] = record.offset + 1  # after its end was told too: it moved on
                    yield record
                elif error.code() == KafkaError._PARTITION_EOF:
                    self.reached[key] = max(self.reached.get(key, 0), msg.offset() or 0)
                    self.told.add(key)
                elif error.code() == KafkaError._AUTO_OFFSET_RESET:
                    self.lost.add(key)
        finally:
            self.consumer.unassign()

    def _note_lost(self, past: PastEnd) -> None:
        """Name lost each partition not at its end yet that is read from past its end."""
        for key in set(self.starts) - self.told - self.lost:
            if past.lost(key, self.reached.get(key, self.starts[key])):
                self.lost.add(key)

    @property
    def ended(self) -> dict[Partition, int]:
        """Where each partition whose end was told was read to: its end, or past it."""
        return {key: self.reached[key] for key in self.told}

    @property
    def short(self) -> list[Partition]:
        """The partitions whose end was not told, nor their loss: a reading of them is a lower
        bound."""
        return sorted(set(self.starts) - self.told - self.lost)
