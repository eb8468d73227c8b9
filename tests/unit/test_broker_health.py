"""What `toolgate status` says of the broker's nodes (ops/status.py `broker_cluster`) and how it
judges them (ops/health.py): a node the cluster's metadata does not list serves nothing."""

from __future__ import annotations

from typing import Any

import pytest

from toolgate.ops.health import Limits, Severity, judge
from toolgate.ops.snapshot import BrokerCluster, BrokerNode, Process, Snapshot
from toolgate.ops.status import broker_cluster

THREE = {
    "broker": "kafka",
    "version": "4.4.0",
    "cluster_id": "x",
    "nodes": {"kafka-1": "127.0.0.1:9101", "kafka-2": "127.0.0.1:9102", "kafka-3": "127.0.0.1:9103"},
}


def test_every_node_the_metadata_lists_is_serving() -> None:
    cluster = broker_cluster({"broker_cluster": THREE}, {"127.0.0.1:9101", "127.0.0.1:9102", "127.0.0.1:9103"})
    assert cluster == BrokerCluster(
        "kafka",
        (
            BrokerNode("kafka-1", "127.0.0.1:9101", True),
            BrokerNode("kafka-2", "127.0.0.1:9102", True),
            BrokerNode("kafka-3", "127.0.0.1:9103", True),
        ),
        "4.4.0",
    )


@pytest.mark.parametrize(
    ("runtime", "listed", "expected"),
    [
        (
            {"broker_cluster": THREE},
            {"127.0.0.1:9101", "127.0.0.1:9103"},
            [("kafka-1", True), ("kafka-2", False), ("kafka-3", True)],
        ),
        ({"broker_cluster": THREE}, None, [("kafka-1", None), ("kafka-2", None), ("kafka-3", None)]),
        (
            {"broker_cluster": {"broker": "tansu", "nodes": {"broker": "127.0.0.1:9092"}}},
            {"127.0.0.1:9092"},
            [("broker", True)],
        ),
        (None, {"kafka:9092"}, [("kafka:9092", True)]),  # no runtime file: what the metadata lists
        ({}, None, []),  # a runtime file of before, the broker not answering
    ],
    ids=["a node fenced", "metadata not read", "tansu", "external", "nothing known"],
)
def test_nodes_and_whether_they_serve(
    runtime: dict[str, Any] | None, listed: set[str] | None, expected: list[tuple[str, bool | None]]
) -> None:
    cluster = broker_cluster(runtime, listed)
    assert [(n.name, n.serving) for n in cluster.nodes] == expected


def snapshot(cluster: BrokerCluster) -> Snapshot:
    return Snapshot("/h", Process("toolgate up", 1, True), broker=cluster)


def test_a_node_not_serving_is_unhealthy_and_one_not_read_is_left_to_the_read_error() -> None:
    cluster = BrokerCluster(
        "kafka",
        (
            BrokerNode("kafka-1", "127.0.0.1:9101", True),
            BrokerNode("kafka-2", "127.0.0.1:9102", False),
            BrokerNode("kafka-3", "127.0.0.1:9103", None),
        ),
        "4.4.0",
    )
    findings = judge(snapshot(cluster), Limits())
    assert [(f.severity, f.subject) for f in findings] == [(Severity.UNHEALTHY, "kafka-2")]
    assert "127.0.0.1:9102 is not in the cluster's metadata" in findings[0].reason
