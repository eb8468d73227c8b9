"""Records whose header keys are not UTF-8, as any producer may write them onto any topic.

confluent-kafka cannot produce such a key, but kafka-python can: its record builder writes each
header key as `key.encode("utf-8")`, so a `str` whose `encode` returns other bytes goes onto the
wire as it is, and the broker (Tansu) stores it. Read back with confluent-kafka, the record's
`headers()` raises (topics/consumed.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kafka import KafkaProducer

KEY_BYTES = b"\xff\xfe-poison"


class NotUtf8(str):
    """A header key that kafka-python encodes to bytes that are not UTF-8."""

    def encode(self, encoding: str = "utf-8", errors: str = "strict") -> bytes:
        return KEY_BYTES


def kafka_python(kafka: dict[str, str]) -> dict[str, Any]:
    """librdkafka's client settings (bootstrap, SASL, TLS) as kafka-python's arguments."""
    words = {
        "bootstrap.servers": "bootstrap_servers",
        "security.protocol": "security_protocol",
        "sasl.mechanism": "sasl_mechanism",
        "sasl.username": "sasl_plain_username",
        "sasl.password": "sasl_plain_password",
        "ssl.ca.location": "ssl_cafile",
    }
    return {words[key]: value for key, value in kafka.items()}


class Poisoner:
    """Publishes records with a header key that is not UTF-8 (and any other headers given)."""

    def __init__(self, kafka: dict[str, str]) -> None:
        """`kafka`: librdkafka's settings of the principal it writes as (Pipeline.kafka), said
        again in kafka-python's words."""
        self.producer = KafkaProducer(max_request_size=4 * 1024 * 1024, **kafka_python(kafka))

    def send(
        self,
        topic: str,
        value: bytes,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Sequence[tuple[str, bytes]] = (),
    ) -> None:
        poisoned = [(NotUtf8("poison"), b"x"), *headers]
        self.producer.send(topic, value=value, key=key, partition=partition, headers=poisoned).get(timeout=30)

    def close(self) -> None:
        self.producer.close()
