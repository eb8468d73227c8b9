"""The bench's reader of its run's final observations, on a thread of its own: when each came,
and whether it was an error (ops/bench/run.py drives the calls)."""

from __future__ import annotations

import threading
import time
import uuid

from confluent_kafka import Consumer, TopicPartition

from toolgate.client import ToolgateClient
from toolgate.client.calls import INTERIM_CODE
from toolgate.schemas.codec import DecodeError, codec
from toolgate.schemas.models import Observation
from toolgate.topics import consumed
from toolgate.topics.headers import CALL_ID, header


class Collector(threading.Thread):
    """Reads the tenant's observations of the calls whose run ids begin with `run_prefix`,
    until `expected` came or `stop` is set: the first final answer of each call, genuine only."""

    def __init__(self, client: ToolgateClient, tenant: str, run_prefix: str, expected: int) -> None:
        super().__init__(daemon=True)
        self.client = client
        self.tenant = tenant
        self.run_prefix = run_prefix
        self.expected = expected
        self.received: dict[str, tuple[float, bool]] = {}
        self.forged = 0
        self.start_offsets = client._end_offsets(tenant)
        self.stop = threading.Event()
        self.done = threading.Event()
        # Connected, with the topic's metadata, before the run's clock starts (as `connect` does
        # for the client): otherwise the first observations wait for it.
        self.topic = client.topics.name("observations", tenant)
        self.consumer = Consumer(
            {
                **client.kafka_config,
                "bootstrap.servers": client.bootstrap,
                "group.id": f"toolgate-bench-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 10,
            }
        )
        self.consumer.list_topics(self.topic, timeout=10.0)

    def run(self) -> None:
        consumer = self.consumer
        consumer.assign([TopicPartition(self.topic, p, o) for p, o in self.start_offsets])
        c = codec()
        run_prefix = self.run_prefix.encode()
        try:
            while not self.stop.is_set() and len(self.received) < self.expected:
                # consume() waits out its whole timeout unless the batch fills: keep it short.
                for msg in consumer.consume(500, 0.005):
                    if msg.error():
                        continue
                    record = consumed.read(msg)
                    if not (record.key or b"").startswith(run_prefix):
                        continue
                    if isinstance(record, consumed.Unreadable) or not self.client.genuine(record):
                        self.forged += 1  # unsigned: one that cannot be read carries no signature
                        continue
                    now = time.perf_counter()
                    call_id = header(record.headers, CALL_ID) or ""
                    try:
                        status = c.decode(record.value or b"", Observation).status
                    except DecodeError:
                        continue
                    if status.code == INTERIM_CODE or call_id in self.received:
                        continue
                    self.received[call_id] = (now, status.is_error)
        finally:
            consumer.close()
            self.done.set()
