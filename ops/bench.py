"""`toolgate bench`: drive N proposals through the running pipeline and measure it.

Each call uses the tool contract's first example as arguments and a fresh logical operation
(so every call is a new effect, never an idempotency replay). Proposals are published at full
speed or at an offered rate; a consumer thread reads tool.observations from where it ended
before the run. Latency is publish-to-final-observation, measured on this client's clock.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from toolgate.contracts.registry import load_registry
from toolgate.schemas.codec import DecodeError, codec
from toolgate.schemas.models import Observation
from toolgate.settings import Settings
from toolgate.topics.client import INTERIM_CODE, ToolgateClient
from toolgate.topics.headers import CALL_ID, header


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, max(0, round(q / 100 * (len(sorted_values) - 1))))
    return sorted_values[index]


class _Collector(threading.Thread):
    def __init__(self, client: ToolgateClient, run_id: str, expected: int) -> None:
        super().__init__(daemon=True)
        self.client = client
        self.run_id = run_id
        self.expected = expected
        self.received: dict[str, tuple[float, bool]] = {}
        self.start_offsets = client._end_offsets()
        self.stop = threading.Event()
        self.done = threading.Event()

    def run(self) -> None:
        topic = self.client.topics.observations
        consumer = Consumer(
            {
                "bootstrap.servers": self.client.bootstrap,
                "group.id": f"toolgate-bench-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 10,
            }
        )
        consumer.assign([TopicPartition(topic, p, o) for p, o in self.start_offsets])
        c = codec()
        run_key = self.run_id.encode()
        try:
            while not self.stop.is_set() and len(self.received) < self.expected:
                for msg in consumer.consume(500, 0.1):
                    if msg.error() or msg.key() != run_key:
                        continue
                    now = time.perf_counter()
                    call_id = header(msg.headers(), CALL_ID) or ""
                    try:
                        status = c.decode(msg.value() or b"", Observation).status
                    except DecodeError:
                        continue
                    if status.code == INTERIM_CODE or call_id in self.received:
                        continue
                    self.received[call_id] = (now, status.is_error)
        finally:
            consumer.close()
            self.done.set()


def run_bench(
    settings: Settings, *, tool: str, calls: int, rate: float, tenant: str, timeout: float, progress: bool = True
) -> dict[str, Any]:
    contract = load_registry(settings.contracts_dir).resolve(tool, "latest")
    example = json.dumps(contract.document["affordance"]["examples"][0]["arguments"])
    scopes = list(contract.required_scopes)
    client = ToolgateClient(settings.kafka_bootstrap, settings.topic_prefix, client_id="toolgate-bench")
    run_id = f"bench_{uuid.uuid4().hex[:10]}"
    collector = _Collector(client, run_id, calls)
    collector.start()
    sent: dict[str, float] = {}
    started = time.perf_counter()
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        disable=not progress,
    )
    with bar:
        published = bar.add_task("published", total=calls)
        observed = bar.add_task("observed ", total=calls)
        for i in range(calls):
            if rate > 0:
                due = started + i / rate
                while (lag := due - time.perf_counter()) > 0:
                    time.sleep(min(lag, 0.01))
            call_id = f"bench_{uuid.uuid4().hex}"
            sent[call_id] = time.perf_counter()
            client.propose(
                tool,
                example,
                tenant_id=tenant,
                user_id="bench",
                agent_id="bench",
                scopes=scopes,
                run_id=run_id,
                call_id=call_id,
                flush=False,
            )
            if i % 200 == 0:
                bar.update(published, completed=i)
                bar.update(observed, completed=len(collector.received))
        client.flush()
        publish_done = time.perf_counter()
        bar.update(published, completed=calls)
        deadline = time.monotonic() + timeout
        while not collector.done.is_set() and time.monotonic() < deadline:
            bar.update(observed, completed=len(collector.received))
            time.sleep(0.1)
        collector.stop.set()
        collector.join(5)
        bar.update(observed, completed=len(collector.received))
    received = dict(collector.received)
    latencies = sorted((received[c][0] - t) * 1000 for c, t in sent.items() if c in received)
    last = max((v[0] for v in received.values()), default=publish_done)
    elapsed = max(1e-9, last - started)
    return {
        "tool": tool,
        "calls": calls,
        "offered_rate": rate or None,
        "observed": len(received),
        "missing": calls - len(received),
        "errors": sum(1 for _, is_error in received.values() if is_error) + (calls - len(received)),
        "calls_per_second": round(len(received) / elapsed, 1),
        "publish_seconds": round(publish_done - started, 2),
        "elapsed_seconds": round(elapsed, 2),
        "p50_ms": round(percentile(latencies, 50), 1),
        "p95_ms": round(percentile(latencies, 95), 1),
        "p99_ms": round(percentile(latencies, 99), 1),
        "max_ms": round(latencies[-1], 1) if latencies else 0.0,
    }
