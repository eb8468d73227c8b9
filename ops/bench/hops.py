"""When each call of a bench run reached each topic, from the records themselves.

Every record carries its produce time (its Kafka timestamp, set by the producing process on
this host's clock). A proposal and an observation name their call in the `toolgate-call-id`
header; an internal topic's record is a StageBatch, so its calls are the `call_id`s of its
items, and the record is counted only once its stage MAC verifies, as a stage's intake checks
it. Nothing on the wire changes for this: the bench only reads, after its run, from where each
topic ended before it, through the guarded reader (topics/consumed.py): a record that cannot be
read is skipped.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator

from confluent_kafka import Consumer, TopicPartition

from toolgate.client import ToolgateClient
from toolgate.client.calls import INTERIM_CODE
from toolgate.ops.bench.stats import INTERNAL_POINTS, POINTS
from toolgate.schemas.codec import DecodeError, codec
from toolgate.schemas.models import Observation, StageBatch
from toolgate.schemas.wire import field_of
from toolgate.secrets import SecretProvider
from toolgate.settings import Settings
from toolgate.topics import consumed
from toolgate.topics.headers import CALL_ID, header
from toolgate.trust.integrity import Sealer, deployment_keys

log = logging.getLogger("toolgate.bench")
Offsets = dict[str, list[tuple[int, int]]]  # topic -> (partition, offset) to read from


class TopicTimes:
    """The produce times of a run's calls on tool.proposals, the internal topics and the
    tenant's observations; `start()` before the run, `read(call_ids)` after it."""

    def __init__(self, settings: Settings, client: ToolgateClient, tenant: str) -> None:
        self.client = client
        secrets = SecretProvider(settings.secrets_path)
        # Without the deployment secret (a client host) the stage MACs cannot be checked.
        self.sealer = (
            Sealer(deployment_keys(settings), client.topics) if secrets.has(settings.deployment_secret_ref) else None
        )
        self.points = {client.topics.name("proposals"): "proposals"}
        self.points |= {client.topics.name(p): p for p in INTERNAL_POINTS}
        self.points[client.topics.name("observations", tenant)] = "observation"
        self.start_offsets: Offsets = {}

    def start(self) -> None:
        consumer = self._consumer()
        try:
            for topic in self.points:
                meta = consumer.list_topics(topic, timeout=10.0).topics[topic]
                self.start_offsets[topic] = [
                    (p, consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10.0)[1])
                    for p in sorted(meta.partitions)
                ]
        finally:
            consumer.close()

    def read(self, call_ids: set[str], idle_s: float = 1.0) -> dict[str, dict[str, float]]:
        """call_id -> point -> ms, the first time each call was seen at each point."""
        paths: dict[str, dict[str, float]] = {c: {} for c in call_ids}
        if self.sealer is None:
            return paths
        consumer = self._consumer()
        consumer.assign([TopicPartition(t, p, o) for t, offsets in self.start_offsets.items() for p, o in offsets])
        wanted = len(call_ids) * len(POINTS)
        seen = 0
        last = time.monotonic()
        try:
            while time.monotonic() - last < idle_s and seen < wanted:
                for msg in consumer.consume(1000, 0.1):
                    if msg.error():
                        continue
                    last = time.monotonic()
                    record = consumed.read(msg)
                    if isinstance(record, consumed.Unreadable):  # no call of the run: toolgate signs its own
                        consumed.skipped(log, record, "bench hops")
                        continue
                    point = self.points.get(record.topic, "")
                    for call_id in self._calls(point, record):
                        if call_id in paths and point not in paths[call_id]:
                            paths[call_id][point] = float(record.timestamp_ms or 0)
                            seen += 1
        finally:
            consumer.close()
        return paths

    def _calls(self, point: str, record: consumed.Consumed) -> Iterator[str]:
        value = record.value or b""
        if point in INTERNAL_POINTS:
            if self.sealer is None or not self.sealer.mac_ok(record.topic, value, record.headers):
                return
            try:
                items = codec().decode(value, StageBatch).items
            except DecodeError:
                return
            for item in items:
                try:
                    call_id = field_of(codec().model_of(item), "call_id")
                except DecodeError:
                    continue
                if call_id is not None:
                    yield str(call_id)
        elif point == "proposals":
            yield header(record.headers, CALL_ID) or ""
        elif point == "observation" and self.client.genuine(record):
            try:
                if codec().decode(value, Observation).status.code == INTERIM_CODE:
                    return
            except DecodeError:
                return
            yield header(record.headers, CALL_ID) or ""

    def _consumer(self) -> Consumer:
        return Consumer(
            {
                **self.client.kafka_config,
                "bootstrap.servers": self.client.bootstrap,
                "group.id": f"toolgate-bench-hops-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 10,
            }
        )
