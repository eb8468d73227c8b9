"""Partitions read to the end they have when read (topics/ends.py), through the session's real
broker: every record is read, each partition says where it ends, and one that cannot say so is
named rather than taken as read. `toolgate dlq list` and `status` read that way (ops/dlq.py,
ops/lag.py): a dead-letter topic not read to its end is an error, never a shorter listing."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer

from toolgate.ops import dlq
from toolgate.ops.stack.embedded import Broker
from toolgate.ops.stack.kafka_broker import KafkaCluster
from toolgate.topics.catalog import Topics
from toolgate.topics.ends import READER_SETTINGS, ToEnd

from ..conftest import Pipeline


def reader(bootstrap: str) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": f"ends-{uuid.uuid4().hex[:8]}", **READER_SETTINGS})


def test_every_record_is_read_and_each_partition_says_where_it_ends(broker: Broker, topic_prefix: str) -> None:
    topic = Topics(topic_prefix).deadletter
    # Many records a produce request: the embedded Tansu's ListOffsets then reports the last
    # batch's base offset plus one as the end (ops/status.py); a fetch answer carries the true one.
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50})
    for i in range(300):
        producer.produce(topic, value=b"%d" % i, partition=i % 2)
    assert producer.flush(30) == 0
    consumer = reader(broker.bootstrap)
    try:
        reading = ToEnd(consumer, {(topic, 0): OFFSET_BEGINNING, (topic, 1): OFFSET_BEGINNING}, 30.0)
        read = list(reading)
        assert consumer.assignment() == []
    finally:
        consumer.close()
    assert sorted(int(r.value or b"") for r in read) == list(range(300))
    assert Counter(r.partition for r in read) == {0: 150, 1: 150}
    assert reading.ended == {(topic, 0): 150, (topic, 1): 150} and reading.short == []


def test_a_partition_that_never_says_where_it_ends_is_named_not_taken_as_read(
    broker: Broker, topic_prefix: str
) -> None:
    topic = Topics(topic_prefix).deadletter
    consumer = reader(broker.bootstrap)
    try:  # the catalog's topics have two partitions: a third has no end to tell
        reading = ToEnd(consumer, {(topic, 0): OFFSET_BEGINNING, (topic, 2): OFFSET_BEGINNING}, 3.0)
        list(reading)
    finally:
        consumer.close()
    assert (topic, 0) in reading.ended
    assert reading.short == [(topic, 2)]


def test_a_record_come_after_its_partitions_end_was_told_moves_that_end_past_it(
    broker: Broker, topic_prefix: str
) -> None:
    # A reading goes on while any partition has not told its end; what comes meanwhile to one
    # that has is read too. Before, its `ended` stayed where it was first told, and a reader going
    # on from there (ToolgateClient.observations) listed that record a second time: stop 73's CI
    # saw nine answers to a call sent seven times.
    topic = Topics(topic_prefix).validated  # a topic no other test here writes to
    consumer = reader(broker.bootstrap)
    reading = ToEnd(consumer, {(topic, 0): OFFSET_BEGINNING, (topic, 2): OFFSET_BEGINNING}, 5.0)

    def late() -> None:  # once partition 0 told its end: one record more to it
        while (topic, 0) not in reading.told:
            time.sleep(0.01)
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        producer.produce(topic, value=b"late", partition=0)
        producer.flush(10)

    thread = threading.Thread(target=late, daemon=True)
    thread.start()
    try:  # partition 2 does not exist, so the reading goes on to its limit
        read = list(reading)
    finally:
        consumer.close()
        thread.join(10)
    assert [(r.partition, r.offset, r.value) for r in read] == [(0, 0, b"late")]
    assert reading.ended == {(topic, 0): 1}


def test_a_partition_read_from_past_its_end_is_lost_on_either_broker(
    broker: Broker | KafkaCluster, topic_prefix: str
) -> None:
    # As when a log started over under a reader (the embedded broker restarted, memory only).
    # Apache Kafka says so (`auto.offset.reset` is `error` here); the embedded Tansu answers with
    # nothing but the partition's end. Before, a reading took that for a partition slow to tell
    # its end: it waited to its limit and left it short, and a client's listing from there failed.
    topic = Topics(topic_prefix).authorized  # a topic no other test here writes to
    consumer = Consumer(
        {
            **READER_SETTINGS,
            "bootstrap.servers": broker.bootstrap,
            "auto.offset.reset": "error",
            "group.id": f"ends-{uuid.uuid4().hex[:8]}",
        }
    )
    try:
        reading = ToEnd(consumer, {(topic, 0): 1_000, (topic, 1): OFFSET_BEGINNING}, 30.0)
        assert list(reading) == []
    finally:
        consumer.close()
    assert (topic, 1) in reading.ended
    assert reading.lost == {(topic, 0)} and reading.short == []


def test_a_dead_letter_topic_not_read_to_its_end_is_an_error_not_a_shorter_listing(pipeline: Pipeline) -> None:
    # Before, the topic was read until it had been quiet for two seconds, and whatever had come by
    # then was the listing: with no time to read, an empty one.
    assert isinstance(dlq.read_all(pipeline.settings, limit_s=30.0), list)
    with pytest.raises(dlq.DeadLettersUnread, match=r"did not say where .*deadletter"):
        dlq.read_all(pipeline.settings, limit_s=0.0)
