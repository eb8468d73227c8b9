"""The clients the gauges (ops/gauges.py) keep from one sample to the next.

`toolgate status` makes its clients for one reading; the gauges read the same every 15 s, and
made anew each time they were most of an idle stack's CPU: three Postgres connections (a SCRAM
exchange each), an admin client and two consumers (on a secured cluster, TLS and SCRAM once
more), and the whole dead-letter topic read again to its end.
Kept instead:

* one Postgres connection (autocommit) for every query of a sample;
* one admin client and one end reader (ops/lag.py `end_reader`) for the consumer lag;
* the dead-letter topic read as it grows (`LetterTally`): each letter read once, and kept as its
  id and the ids of the keys whose MAC it carries, so that it is genuine for as long as one of
  them is accepted (a retired key makes its letters forged, as `toolgate dlq list` shows them),
  and no letter's bytes are held.

A client that failed is dropped and made again at the next sample.
"""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from toolgate.kafka_security import OPERATOR, client_config
from toolgate.ops import dlq, lag
from toolgate.ops.acls import GAUGES_GROUP_PREFIX
from toolgate.ops.snapshot import Lag
from toolgate.settings import Settings
from toolgate.topics import consumed
from toolgate.topics.catalog import Topics
from toolgate.topics.ends import READER_SETTINGS, ToEnd
from toolgate.trust.integrity import Sealer, deployment_keys

# The longest one reading of the dead-letter topic lasts: a partition whose end the broker has not
# told by then is counted as far as it was read, and read on at the next sample.
READ_LIMIT_S = 5.0
Kept = tuple[str, frozenset[str]]  # a letter's id, and the keys whose MAC it carries


class LetterTally:
    """The dead-letter topic's letters, read from its beginning once and then as it grows, each
    sample to the end each partition has then (as `toolgate dlq list` reads, topics/ends.py: the
    end the broker tells, not a quiet spell). A partition whose log started over (the embedded
    broker, memory only, restarted; a topic made again) is lost to the reading (topics/ends.py;
    the tally's `auto.offset.reset` is `error`, so Apache Kafka does not read it from its start
    unasked), and starts the tally over from the topic's beginning. The letters below where a
    partition's log begins now (retention, 30 days; records deleted) are forgotten."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.topic = Topics(settings.topic_prefix).deadletter
        self.consumer = Consumer(
            {
                **client_config(settings, OPERATOR),
                "bootstrap.servers": settings.kafka_bootstrap,
                "group.id": f"{GAUGES_GROUP_PREFIX}{uuid.uuid4().hex[:8]}",
                **READER_SETTINGS,
                "auto.offset.reset": "error",
            }
        )
        self.kept: dict[tuple[int, int], Kept] = {}  # by (partition, offset)
        self.next: dict[int, int] = {}  # partition -> the offset to read from at the next sample

    def letters(self) -> list[tuple[str, bool]]:
        """Every letter on the topic now: its id, and whether it is genuine now (its MAC made
        with a key accepted now)."""
        if not self.next:
            self._start_over()
        reading = self._read_on()
        if reading.lost:
            self._start_over()
            self._read_on()
        self._forget_removed()
        accepted = set(deployment_keys(self.settings).view().accepted)
        return [(letter_id, bool(keys & accepted)) for letter_id, keys in self.kept.values()]

    def close(self) -> None:
        self.consumer.close()

    def _read_on(self) -> ToEnd:
        """Read on from where the last sample stopped; between samples nothing is assigned, so
        the consumer fetches nothing."""
        sealer = Sealer(deployment_keys(self.settings), Topics(self.settings.topic_prefix))
        reading = ToEnd(self.consumer, {(self.topic, p): offset for p, offset in self.next.items()}, READ_LIMIT_S)
        for record in reading:
            found = dlq.read_letter(record, sealer, self.topic)
            if found is not None:
                keys = frozenset[str]()
                if isinstance(record, consumed.Consumed):  # an unreadable one's MAC cannot be read: forged
                    keys = sealer.mac_keys(self.topic, record.value or b"", record.headers)
                self.kept[(record.partition, record.offset)] = (found.letter.dead_letter_id, keys)
        self.next.update((partition, offset) for (_, partition), offset in reading.reached.items())
        return reading

    def _forget_removed(self) -> None:
        """Forget the letters the broker no longer holds: those below where each partition's log
        begins now (retention removed them, or an operator deleted them), which `toolgate dlq
        list` no longer lists either."""
        for partition in self.next:
            begins, _ = self.consumer.get_watermark_offsets(
                TopicPartition(self.topic, partition), timeout=lag.KAFKA_TIMEOUT_S
            )
            for key in [key for key in self.kept if key[0] == partition and key[1] < begins]:
                del self.kept[key]

    def _start_over(self) -> None:
        topics = self.consumer.list_topics(self.topic, timeout=lag.KAFKA_TIMEOUT_S).topics
        self.kept.clear()
        self.next = dict.fromkeys(sorted(topics[self.topic].partitions), OFFSET_BEGINNING)


class Readers:
    """The gauges' clients, each made at its first use and again after a failure: a Kafka
    client when its part is dropped (`drop`), the Postgres connection when psycopg finds it
    closed or broken."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._postgres: psycopg.Connection[Any] | None = None
        self._admin: AdminClient | None = None
        self._ends: Consumer | None = None
        self._tally: LetterTally | None = None

    def postgres(self) -> psycopg.Connection[Any]:
        if self._postgres is None or self._postgres.closed or self._postgres.broken:
            self._postgres = psycopg.connect(
                self.settings.database_url, connect_timeout=int(lag.KAFKA_TIMEOUT_S), autocommit=True
            )
        return self._postgres

    def lags(self) -> tuple[Lag, ...]:
        if self._admin is None or self._ends is None:
            self._admin, self._ends = AdminClient(lag.admin_config(self.settings)), lag.end_reader(self.settings)
        return lag.lags(self.settings, self._admin, self._ends)

    def tally(self) -> LetterTally:
        if self._tally is None:
            self._tally = LetterTally(self.settings)
        return self._tally

    def open_letters(self) -> int:
        acted = dlq.actions(self.settings, self.postgres())
        states = [dlq.state(genuine, acted.get(letter_id)) for letter_id, genuine in self.tally().letters()]
        return states.count("open")

    def drop(self, part: str) -> None:
        """Forget the clients of `part` (a sample of it failed): the next sample makes new ones."""
        if part == "lag" and self._ends is not None:
            self._ends.close()
            self._admin = self._ends = None
        elif part == "dead_letters" and self._tally is not None:
            self._tally.close()
            self._tally = None

    def close(self) -> None:
        for part in ("lag", "dead_letters"):
            self.drop(part)
        if self._postgres is not None:
            self._postgres.close()
