"""The one way toolgate writes to Kafka: a `Record`, handed to librdkafka by `enqueue`, through a
process's producers: one that compresses, for the topics only toolgate reads, and one that writes
plain, for the topics others read (topics/catalog.py, `compressed`).

Every writer builds on it: an agent's client (client/edge.py), a stage and the outbox relay
(workers/runtime/producer.py, which awaits each record's acknowledgement). Each decides only what
to do while librdkafka's queue is full: a client polls, a stage yields to its event loop.

Compression is a producer's setting in librdkafka, not a record's, so a process that writes both
kinds of topic holds two producers; each is made when first needed, so a client that writes only
one kind runs one. A stage makes both as it starts (workers/runtime/producer.py, `warm`), since
its first record of each kind would otherwise wait for a producer's connection and metadata.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from toolgate.topics.catalog import Topics
from toolgate.topics.headers import Headers

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")  # librdkafka's, every Kafka since 2.1 takes them


@dataclass(frozen=True, slots=True)
class Record:
    """A record to write: its topic (the physical name), key, value, headers and, when it is
    pinned to one, partition (otherwise the key's, by murmur2 as Java clients map it)."""

    topic: str
    key: bytes | None
    value: bytes
    headers: Headers
    partition: int | None = None


Report = Callable[[KafkaError | None, Any], None]


def enqueue(producer: Producer, record: Record, report: Report) -> KafkaError | None:
    """Hand `record` to librdkafka, `report(error, message)` to be called once the broker
    answered; the error it was refused with before it was queued (too large, an unknown topic),
    or None. Raises BufferError while librdkafka's queue is full: the caller waits, its own way,
    and tries again."""
    headers: Any = record.headers  # confluent-kafka's stubs take a list of str or bytes values, invariantly
    try:
        if record.partition is None:
            producer.produce(record.topic, value=record.value, key=record.key, headers=headers, on_delivery=report)
        else:
            producer.produce(
                record.topic,
                value=record.value,
                key=record.key,
                partition=record.partition,
                headers=headers,
                on_delivery=report,
            )
    except KafkaException as exc:
        error: KafkaError = exc.args[0]
        return error
    return None


class Producers:
    def __init__(self, config: dict[str, Any], topics: Topics, compression: str) -> None:
        """`config`: every producer's librdkafka settings; `compression`: the codec (librdkafka's
        `compression.type`) of the topics only toolgate reads."""
        if compression not in CODECS:
            raise ValueError(f"compression {compression!r} is none of {', '.join(CODECS)}")
        self._config = config
        self._topics = topics
        self._compression = compression
        self._made: dict[str, Producer] = {}

    def codec(self, topic: str) -> str:
        return self._compression if self._topics.compressed(topic) else "none"

    def codecs(self) -> list[str]:
        """The codecs of every producer this client may make: one, or one that compresses too."""
        return list(dict.fromkeys((self._compression, "none")))

    def for_topic(self, topic: str) -> Producer:
        return self.for_codec(self.codec(topic))

    def for_codec(self, codec: str) -> Producer:
        producer = self._made.get(codec)
        if producer is None:
            producer = self._made[codec] = Producer({**self._config, "compression.type": codec})
        return producer

    def made(self) -> list[Producer]:
        return list(self._made.values())
