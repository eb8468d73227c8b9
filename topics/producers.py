"""A client's librdkafka producers: one that compresses, for the topics only toolgate reads, and
one that writes plain, for the topics others read (topics/catalog.py, `compressed`).

Compression is a producer's setting in librdkafka, not a record's, so a process that writes both
kinds of topic holds two producers; each is made when first needed, so a client that writes only
one kind runs one. A stage makes both as it starts (workers/runtime/producer.py, `warm`), since
its first record of each kind would otherwise wait for a producer's connection and metadata.
"""

from __future__ import annotations

from typing import Any

from confluent_kafka import Producer

from toolgate.topics.catalog import Topics

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")  # librdkafka's, every Kafka since 2.1 takes them


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
