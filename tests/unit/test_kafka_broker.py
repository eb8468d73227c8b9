"""Apache Kafka's nodes as `toolgate up --broker kafka` configures them (ops/stack/kafka_broker.py), and
how the topic catalog replicates on a cluster of a given size (topics/catalog.py `Replication`)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from toolgate.ops.stack.kafka_storage import kept_cluster_id, new_cluster_id, node_properties
from toolgate.topics.catalog import Replication


def parsed(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


@pytest.mark.parametrize(
    ("brokers", "factor", "min_insync", "topic_config"),
    [
        (1, 1, 1, {}),
        (2, 2, 1, {"min.insync.replicas": "1"}),
        (3, 3, 2, {"min.insync.replicas": "2"}),
        (5, 3, 2, {"min.insync.replicas": "2"}),
        (0, 1, 1, {}),  # a metadata answer without brokers: as one
    ],
)
def test_replication_follows_the_cluster_s_size(
    brokers: int, factor: int, min_insync: int, topic_config: dict[str, str]
) -> None:
    chosen = Replication.for_brokers(brokers)
    assert (chosen.factor, chosen.min_insync) == (factor, min_insync)
    assert chosen.topic_config() == topic_config


def test_three_nodes_replicate_everything_three_times_and_need_two_for_a_write(tmp_path: Path) -> None:
    ports = {1: (9101, 9201), 2: (9102, 9202), 3: (9103, 9203)}
    props = parsed(node_properties(2, ports, tmp_path / "data"))
    assert props["node.id"] == "2"
    assert props["process.roles"] == "broker,controller"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:9201,2@127.0.0.1:9202,3@127.0.0.1:9203"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:9102,CONTROLLER://127.0.0.1:9202"
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:9102"
    assert props["log.dirs"] == str(tmp_path / "data")
    for key in (
        "default.replication.factor",
        "offsets.topic.replication.factor",
        "transaction.state.log.replication.factor",
        "share.coordinator.state.topic.replication.factor",
    ):
        assert props[key] == "3", key
    for key in ("min.insync.replicas", "transaction.state.log.min.isr", "share.coordinator.state.topic.min.isr"):
        assert props[key] == "2", key
    assert props["group.initial.rebalance.delay.ms"] == "0"
    assert props["auto.create.topics.enable"] == "false"


def test_one_node_keeps_one_copy(tmp_path: Path) -> None:
    props = parsed(node_properties(1, {1: (9101, 9201)}, tmp_path))
    assert props["controller.quorum.voters"] == "1@127.0.0.1:9201"
    assert props["offsets.topic.replication.factor"] == "1"
    assert props["min.insync.replicas"] == "1"


def test_a_cluster_id_is_what_kafka_storage_random_uuid_makes() -> None:
    made = {new_cluster_id() for _ in range(200)}
    assert len(made) == 200
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{22}", i) and not i.startswith("-") for i in made)


def test_the_cluster_id_is_made_once_and_kept(tmp_path: Path) -> None:
    first = kept_cluster_id(tmp_path / "kafka", 3, "4.4.0")
    assert kept_cluster_id(tmp_path / "kafka", 3, "4.4.0") == first
    assert json.loads((tmp_path / "kafka" / "cluster.json").read_text()) == {
        "cluster_id": first,
        "nodes": 3,
        "version": "4.4.0",
        "secure": False,
    }


def test_a_home_made_for_three_nodes_is_refused_with_one(tmp_path: Path) -> None:
    kept_cluster_id(tmp_path / "kafka", 3, "4.4.0")
    with pytest.raises(SystemExit, match="has 3 node"):
        kept_cluster_id(tmp_path / "kafka", 1, "4.4.0")
