"""The outbox relay's producer: confluent-kafka's idempotent producer, awaited, with an answer
for every record.

Sequence numbers per partition make a send retried after a lost acknowledgement land once.
`deliver` returns, for each record, None once the broker acknowledged it or the error it
failed with; `undeliverable` (workers/runtime/producer.py) tells the errors no retry can cure
(a record too large for the broker, a malformed one) from those that pass (the broker
unreachable, a leader moving).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from toolgate.topics.catalog import Topics
from toolgate.topics.producers import Producers
from toolgate.workers.runtime.emit import Message

NOT_ACKNOWLEDGED = KafkaError(KafkaError._TIMED_OUT, "no delivery report before the flush timed out")


class IdempotentProducer:
    """A producer per codec, as a stage has (workers/runtime/producer.py): one compresses with
    `compression`, for the topics only toolgate reads, the other writes the edge topics plain."""

    def __init__(
        self,
        bootstrap: str,
        topics: Topics,
        config: dict[str, str] | None = None,
        linger_ms: int = 0,
        compression: str = "none",
        announce: Callable[[str, int], None] | None = None,
    ) -> None:
        """`announce(topic, partition)` is told of every record the broker acknowledged
        (workers/runtime/wakeup.py)."""
        self._announce = announce
        base = {
            **(config or {}),
            "bootstrap.servers": bootstrap,
            "client.id": "toolgate-outbox-relay",
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": linger_ms,
            "partitioner": "murmur2_random",  # the same partition for a key as the stages' producer
            "message.timeout.ms": 30_000,
        }
        self._producers = Producers(base, topics, compression)

    async def deliver(self, messages: list[Message]) -> list[KafkaError | None]:
        """Produce every message; return each one's error (None: acknowledged)."""
        outcome: list[KafkaError | None] = [NOT_ACKNOWLEDGED] * len(messages)

        def report_for(index: int) -> Any:
            def report(err: KafkaError | None, msg: Any) -> None:
                outcome[index] = err
                if err is None and self._announce is not None:
                    self._announce(msg.topic(), msg.partition())

            return report

        for index, m in enumerate(messages):
            producer = self._producers.for_topic(m.topic)
            kwargs: dict[str, Any] = {
                "key": m.key,
                "value": m.value,
                "headers": m.headers,
                "on_delivery": report_for(index),
            }
            if m.partition is not None:
                kwargs["partition"] = m.partition
            while True:
                try:
                    producer.produce(m.topic, **kwargs)
                    break
                except BufferError:
                    await asyncio.to_thread(producer.poll, 0.05)
                except KafkaException as exc:  # refused before it was queued (too large, ...)
                    outcome[index] = exc.args[0]
                    break
        for producer in self._producers.made():  # one with nothing queued returns at once
            await asyncio.to_thread(producer.flush, 30.0)
        return outcome
