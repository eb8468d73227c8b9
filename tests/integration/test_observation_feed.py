"""A client's kept observation feed (client/feed.py) through the session's real broker."""

from __future__ import annotations

import uuid

from confluent_kafka import Consumer, Producer

from toolgate.client.feed import FETCH_WAIT_MS, ObservationFeed
from toolgate.ops.stack.embedded import Broker
from toolgate.ops.stack.kafka_broker import KafkaCluster
from toolgate.topics.catalog import Topics
from toolgate.topics.consumed import Consumed
from toolgate.topics.headers import CALL_ID


def test_a_feed_read_past_its_end_reads_from_the_start_and_hears_the_answer_there(
    broker: Broker | KafkaCluster, topic_prefix: str
) -> None:
    # As when the embedded broker came back empty (memory only) under a client that kept its
    # feed: the answers to the calls it sends again come below where the feed reads. Apache
    # Kafka's consumer reads such a partition from its start (`earliest`); before, on the embedded
    # Tansu, the feed heard nothing until the log grew past where it read.
    topic = Topics(topic_prefix).results
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"feed-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": FETCH_WAIT_MS,
        }
    )

    def value(record: Consumed) -> bytes:
        return record.value or b""

    feed = ObservationFeed(consumer, topic, {0: 1_000, 1: 1_000}, value)
    try:
        feed.watch("call_again")
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        producer.produce(topic, value=b"answer", partition=0, headers=[(CALL_ID, b"call_again")])
        assert producer.flush(10) == 0
        assert feed.take("call_again", lambda _: True, timeout=30.0) == b"answer"
        assert feed.positions[0] == 1
    finally:
        feed.close()
