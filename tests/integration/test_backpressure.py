"""A stage that falls behind slows its fetch down; it never drops a record.

A validation worker with a tiny stream buffer (as any worker is, relative to a big enough
backlog) against the session's broker and Postgres, on topics and a database of its own: 600
signed proposals arrive far faster than it takes them, and every one comes out on tool.validated.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from toolgate.agent_keys import AgentKeyring
from toolgate.ops.embedded import Broker
from toolgate.schemas.codec import codec
from toolgate.schemas.models import StageBatch, StageRecord
from toolgate.topics.catalog import Topics
from toolgate.topics.client import ToolgateClient

from .conftest import Database

CALLS = 600


def _validated_call_ids(bootstrap: str, topic: str, expected: int, timeout: float) -> set[str]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bp-{uuid.uuid4().hex[:6]}"})
    consumer.assign([TopicPartition(topic, p, 0) for p in (0, 1)])
    seen: set[str] = set()
    deadline = time.monotonic() + timeout
    try:
        while len(seen) < expected and time.monotonic() < deadline:
            for msg in consumer.consume(500, 0.2):
                if msg.error():
                    continue
                for item in codec().decode(msg.value() or b"", StageBatch).items:
                    seen.add(codec().decode(item, StageRecord).call_id)
    finally:
        consumer.close()
    return seen


def run_validation_against_backlog(
    database: Database, broker: Broker, prefix: str, home: Path, settings: dict[str, str], calls: int
) -> tuple[int, str]:
    """Start a validation worker with `settings`, publish `calls` signed proposals at once; how
    many never came out on tool.validated within 90 s, and the worker's log."""
    bootstrap = broker.bootstrap
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("TOOLGATE_")},
        "TOOLGATE_HOME": str(home),
        "TOOLGATE_SECRETS_DIR": str(database.home / "secrets"),
        "TOOLGATE_KAFKA_BOOTSTRAP": bootstrap,
        "TOOLGATE_DATABASE_URL": database.database_url,
        "TOOLGATE_TOPIC_PREFIX": prefix,
        "TOOLGATE_PARTITIONS": "2",
        "TOOLGATE_TELEMETRY_EXPORTER": "none",
        **settings,
    }
    log = home / "validation.log"
    with open(log, "wb") as out:
        worker = subprocess.Popen(
            [sys.executable, "-m", "toolgate.cli", "worker", "validation"], env=env, stdout=out, stderr=out
        )
    try:
        deadline = time.monotonic() + 60
        while not (home / "ready" / f"{prefix}validation.{worker.pid}").exists():
            assert worker.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        client = ToolgateClient(bootstrap, prefix=prefix, keyring=AgentKeyring(database.home / "agents"))
        sent = {
            client.propose(
                "invoice.fetch", {"invoice_id": "inv_acme0001"}, agent_id="cli", user_id="bp", flush=False
            ).call_id
            for _ in range(calls)
        }
        client.flush()
        seen = _validated_call_ids(bootstrap, Topics(prefix).validated, calls, timeout=90)
        return len(sent - seen), log.read_text()
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(60)


def test_a_worker_behind_its_backlog_loses_nothing(
    database: Database, broker: Broker, topic_prefix: str, tmp_path: Path
) -> None:
    settings = {"TOOLGATE_STREAM_BUFFER": "16", "TOOLGATE_BATCH_MAX": "8"}
    missing, log = run_validation_against_backlog(database, broker, topic_prefix, tmp_path, settings, CALLS)
    assert missing == 0, f"{missing} of {CALLS} proposals never came out of validation"
    assert "Cannot put" not in log
