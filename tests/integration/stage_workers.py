"""Stage workers as separate processes on the session's broker and a module's own database and
topics, for tests of one stage's behaviour under load (test_backpressure, test_poll_interval)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from toolgate.client import ToolgateClient
from toolgate.ops.stack.embedded import Broker
from toolgate.schemas.codec import codec
from toolgate.schemas.models import ExecutionResult, StageBatch, StageRecord
from toolgate.schemas.wire import field_of

from .conftest import Database

PARTITIONS = 2


def worker_env(database: Database, broker: Broker, prefix: str, home: Path, settings: dict[str, str]) -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("TOOLGATE_")},
        "TOOLGATE_HOME": str(home),
        "TOOLGATE_SECRETS_DIR": str(database.home / "secrets"),
        "TOOLGATE_KAFKA_BOOTSTRAP": broker.bootstrap,
        "TOOLGATE_DATABASE_URL": database.database_url,
        "TOOLGATE_TOPIC_PREFIX": prefix,
        "TOOLGATE_PARTITIONS": str(PARTITIONS),
        "TOOLGATE_TELEMETRY_EXPORTER": "none",
        "TOOLGATE_METRICS_PORT": "-1",
        **settings,
    }


@contextmanager
def running(stage: str, env: dict[str, str]) -> Iterator[Path]:
    """A worker of `stage`, ready (its group joined); yields its log, and stops it on the way out."""
    home = Path(env["TOOLGATE_HOME"])
    prefix = env["TOOLGATE_TOPIC_PREFIX"]
    log = home / f"{stage}.log"
    with open(log, "ab") as out:
        command = [sys.executable, "-m", "toolgate.cli", "worker", stage]
        worker = subprocess.Popen(command, env=env, stdout=out, stderr=out)
    try:
        deadline = time.monotonic() + 60
        while not (home / "ready" / f"{prefix}{stage}.{worker.pid}").exists():
            assert worker.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        yield log
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(60)


def publish_fetches(client: ToolgateClient, calls: int, user_id: str) -> set[str]:
    """`calls` signed `invoice.fetch` proposals, published at once; their call ids."""
    sent = {
        client.propose(
            "invoice.fetch", {"invoice_id": "inv_acme0001"}, agent_id="cli", user_id=user_id, flush=False
        ).call_id
        for _ in range(calls)
    }
    client.flush()
    return sent


def call_ids_on(
    bootstrap: str,
    topic: str,
    wanted: set[str],
    timeout: float,
    enough: int | None = None,
    model: type[StageRecord | ExecutionResult] = StageRecord,
) -> set[str]:
    """The call ids of the items (StageRecords, or `model`) on an internal topic, read until all
    of `wanted` came (or `enough` of them), or `timeout`."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"sw-{uuid.uuid4().hex[:6]}"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    seen: set[str] = set()
    deadline = time.monotonic() + timeout
    try:
        target = len(wanted) if enough is None else enough
        while len(wanted & seen) < target and time.monotonic() < deadline:
            for msg in consumer.consume(500, 0.2):
                if msg.error():
                    continue
                for item in codec().decode(msg.value() or b"", StageBatch).items:
                    seen.add(str(field_of(codec().decode(item, model), "call_id")))
    finally:
        consumer.close()
    return seen
