"""`toolgate up --broker kafka --brokers 3`, as it promises (ops/stack/kafka_broker.py): every topic of
the catalog, and Kafka's consumer offsets, on three replicas with `min.insync.replicas` 2;
`toolgate status` naming three healthy nodes; and a stop and start on the same home that finds
the cluster as it was (the same cluster id, no topic made again, nothing re-driven), a call made
before still on its observation topic and a new call answered; and every node SIGKILLed at once
brought back by `toolgate up` alone.

It runs its own `toolgate up` on a home of its own (three nodes, whatever the session's broker)
and only when the session runs on Kafka (TOOLGATE_TEST_BROKER=kafka): the default session needs
nothing but Python, and this module needs Java and Maven.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource

from toolgate.kafka_security import ADMIN
from toolgate.topics.catalog import describe

from ..conftest import Pipeline, session_broker, started

pytestmark = pytest.mark.skipif(
    session_broker()[0] != "kafka",
    reason="Apache Kafka's own promises (three nodes, replication, data kept): the session runs on Tansu "
    "(TOOLGATE_TEST_BROKER=kafka runs it)",
)
THREE = {"TOOLGATE_BROKER": "kafka", "TOOLGATE_BROKERS": "3"}
TENANTS = ("acme", "globex")


@dataclass
class Restartable:
    """A `toolgate up` on a home of this module's, stopped and started again on demand."""

    home: Path
    stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    pipeline: Pipeline | None = None

    def start(self) -> Pipeline:
        self.pipeline = self.stack.enter_context(started(self.home, **THREE))
        return self.pipeline

    def restart(self) -> Pipeline:
        self.stack.close()
        self.stack = contextlib.ExitStack()
        return self.start()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Restartable]:
    running = Restartable(tmp_path_factory.mktemp("kafka-three"))
    with running.stack:
        running.start()
        yield running
    running.stack.close()


def admin(pipeline: Pipeline) -> AdminClient:
    """The cluster's admin client (on a secured cluster, as the admin principal)."""
    return AdminClient(pipeline.kafka(ADMIN))


def status(pipeline: Pipeline) -> tuple[int, dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-m", "toolgate.cli", "status", "--json"],
        env=pipeline.env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    return done.returncode, json.loads(done.stdout)


def test_every_topic_has_three_replicas_and_needs_two_for_a_write(cluster: Restartable) -> None:
    pipeline = cluster.pipeline
    assert pipeline is not None
    pipeline.call("invoice.fetch", {"invoice_id": "inv_acme0001"})  # every stage's group has joined
    client = admin(pipeline)
    metadata = client.list_topics(timeout=10).topics
    names = [name for name, _ in describe("", TENANTS)]
    assert len(names) == 11  # seven shared, two for each tenant
    for name in [*names, "__consumer_offsets"]:
        partitions = metadata[name].partitions
        assert partitions, name
        for p in partitions.values():
            assert sorted(p.replicas) == [1, 2, 3] and sorted(p.isrs) == [1, 2, 3], (name, p.id, p.replicas, p.isrs)
    described = client.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, name) for name in names])
    for resource, future in described.items():
        assert future.result(timeout=10)["min.insync.replicas"].value == "2", resource.name


def test_status_names_the_three_nodes_healthy(cluster: Restartable) -> None:
    pipeline = cluster.pipeline
    assert pipeline is not None
    code, report = status(pipeline)
    assert code == 0, report["findings"]
    broker = report["broker"]
    assert (broker["broker"], broker["version"]) == ("kafka", "4.4.0")
    assert [(n["name"], n["serving"]) for n in broker["nodes"]] == [
        ("kafka-1", True),
        ("kafka-2", True),
        ("kafka-3", True),
    ]
    infrastructure = {p["name"]: p["alive"] for p in report["infrastructure"]}
    assert infrastructure == {"kafka-1": True, "kafka-2": True, "kafka-3": True, "postgres": True}


def test_every_node_maps_the_archive_of_kafka_s_classes(cluster: Restartable) -> None:
    # ops/stack/kafka_classes.py: made once per Java and jars, mapped by every node's JVM (which, if
    # it could not use it, would start without it, slower, and only its log would say so).
    pipeline = cluster.pipeline
    assert pipeline is not None
    nodes = {name: pid for name, pid in pipeline.runtime["infrastructure"].items() if name.startswith("kafka-")}
    assert sorted(nodes) == ["kafka-1", "kafka-2", "kafka-3"]
    for name, pid in nodes.items():
        archives = {line.split()[-1] for line in Path(f"/proc/{pid}/maps").read_text().splitlines() if ".jsa" in line}
        assert len(archives) == 2, (name, archives)  # Java's own archive, and Kafka's classes
        assert any(Path(a).name.startswith("kafka-4.4.0-") for a in archives), (name, archives)


def test_a_restart_on_the_same_home_keeps_the_cluster_and_its_records(cluster: Restartable) -> None:
    before = cluster.pipeline
    assert before is not None
    answered = before.call("invoice.fetch", {"invoice_id": "inv_acme0001"})
    call_id = answered["tool_identity"]["call_id"]
    assert answered["status"]["taxonomy_class"] == "SUCCESS"
    formatted = {p: p.read_text() for p in sorted((cluster.home / "kafka").glob("node-*/data/meta.properties"))}
    cluster_id = json.loads((cluster.home / "kafka" / "cluster.json").read_text())["cluster_id"]
    assert len(formatted) == 3 and all(f"cluster.id={cluster_id}" in text for text in formatted.values())

    after = cluster.restart()

    said = (cluster.home / "up.out").read_text()
    assert "topics     0 created" in said, said
    assert "re-drive" not in said, said
    assert json.loads((cluster.home / "kafka" / "cluster.json").read_text())["cluster_id"] == cluster_id
    assert {p: p.read_text() for p in formatted} == formatted  # no node formatted again
    kept = [seen.call_id for seen in after.client.observations(tenant_id="acme", call_ids=[call_id], idle_timeout=5.0)]
    assert call_id in kept
    again = after.call("invoice.fetch", {"invoice_id": "inv_acme0001"})
    assert again["tool_identity"]["call_id"] != call_id and again["status"]["taxonomy_class"] == "SUCCESS"


def test_every_node_killed_at_once_comes_back_by_itself(cluster: Restartable) -> None:
    """All three nodes SIGKILLed together: `toolgate up` starts them again together. A combined
    node serves only once a majority of the controllers run; started one after another, each
    awaited before the next, each waited alone for a quorum until Kafka gave up its registration,
    and the cluster never came back."""
    pipeline = cluster.pipeline
    assert pipeline is not None
    killed = {name: pid for name, pid in _infrastructure(cluster.home).items() if name.startswith("kafka-")}
    assert len(killed) == 3
    for pid in killed.values():
        os.kill(pid, signal.SIGKILL)

    deadline = time.monotonic() + 180
    while not _three_serve(pipeline):
        assert time.monotonic() < deadline, (cluster.home / "up.out").read_text()
        time.sleep(1.0)

    revived = {name: pid for name, pid in _infrastructure(cluster.home).items() if name in killed}
    assert all(revived[name] != pid for name, pid in killed.items()), revived
    # The supervisor says a node serves again on its own next look, which may come after the
    # cluster's metadata already shows all three.
    said = (cluster.home / "up.out").read_text()
    while not all(f"{name} serves again" in said for name in killed):
        assert time.monotonic() < deadline, said
        time.sleep(0.5)
        said = (cluster.home / "up.out").read_text()
    answered = pipeline.call("invoice.fetch", {"invoice_id": "inv_acme0001"})
    assert answered["status"]["taxonomy_class"] == "SUCCESS"


def _infrastructure(home: Path) -> dict[str, int]:
    return dict(json.loads((home / "runtime.json").read_text())["infrastructure"])


def _three_serve(pipeline: Pipeline) -> bool:
    """Whether three nodes are in the cluster's metadata and every partition of toolgate's topics
    has a leader."""
    try:
        metadata = admin(pipeline).list_topics(timeout=5)
    except KafkaException:
        return False
    partitions = [p for name, t in metadata.topics.items() if name.startswith("tool.") for p in t.partitions.values()]
    return len(metadata.brokers) == 3 and bool(partitions) and all(p.leader >= 0 for p in partitions)
