"""Apache Kafka for `toolgate up --broker kafka`: N combined broker/controller nodes (KRaft).

Everything lives under the home, so a restart of `toolgate up` finds its cluster as it left it
(its topics, records, committed offsets and producer state):

| path                               | what                                                        |
|------------------------------------|-------------------------------------------------------------|
| `kafka/cluster.json`               | the cluster id, its node count and Kafka version: made once  |
| `kafka/node-<i>/data/`             | node i's log directory (and metadata log), formatted once    |
| `kafka/node-<i>/server.properties` | written at every start (its ports come from ports.json)      |
| `kafka/log4j2.properties`          | the nodes' logging: one line an event, to their log file     |
| `logs/kafka-<i>.log`               | node i's log                                                 |

A node is formatted (`kafka.tools.StorageTool format`, with the cluster id kept in
cluster.json) only when its data directory has no `meta.properties`: never again, so nothing is
lost at a restart. A home made for N nodes is refused with another count (the quorum's voters
are fixed at format): `--fresh` starts over.

Every node is a controller and a broker, the quorum's voters named statically
(`controller.quorum.voters`). Replication follows the cluster's size as the topic catalog
chooses it (topics/catalog.py `Replication`): with three nodes every topic, the consumer
offsets' and the transaction log's included, has three replicas and refuses a write that fewer
than two have taken (`min.insync.replicas`); the producers ask for `acks=all`.

Single-machine settings: a group's first rebalance is not delayed (the stages join at once; the
6 s session timeout they ask for is Kafka's minimum, allowed as it is), the consumer offsets have 10
partitions (50 by default: 150 replicas made at the first group's join), and toolgate's topics
are only ever created by its provisioning (no topic is made by a client that names it). The JVM
runs Kafka's own flags (bin/kafka-run-class.sh) with a heap of `heap_mb` (512 MB by default:
three nodes take ~1.5 GB of this 24 GiB machine) and dies with `toolgate up` (parent-death
signal). It compiles with C1 alone (`JIT`): the nodes share a few cores with the stages and
Postgres, and Kafka's default, C2 as well, spent most of a fresh node's CPU compiling. Unlike the
embedded Tansu it is not pinned to a CPU: that measurement was of Tansu's runtime
(ops/stack/embedded.py).
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolgate.ops.kafka_credentials import BrokerSecurity
from toolgate.ops.stack.kafka_dist import Distribution
from toolgate.ops.stack.kafka_storage import (
    JVM_FLAGS,
    LOG4J2,
    await_unlocked,
    format_storage,
    java,
    kept_cluster_id,
    node_properties,
    write_private,
)
from toolgate.ops.stack.processes import die_with_parent, listening, wait_for_port
from toolgate.topics.catalog import Replication

NODE = "kafka-"  # a node's name, as runtime.json, ports.json and `toolgate status` say it
READY_S = 120.0
STOP_S = 60.0
STABLE_AFTER_S = 30.0  # a node that ran this long before dying is restarted without backoff


@dataclass
class KafkaNode:
    node_id: int
    port: int
    controller_port: int
    directory: Path
    log_path: Path
    internal_port: int = 0  # secured: where the nodes talk to each other
    process: subprocess.Popen[bytes] | None = None
    restarts: int = 0  # in a row, for the backoff
    started_at: float = 0.0
    next_start: float = 0.0
    returning: bool = False  # started again, not yet listening

    @property
    def name(self) -> str:
        return f"{NODE}{self.node_id}"

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def data(self) -> Path:
        return self.directory / "data"

    @property
    def properties(self) -> Path:
        return self.directory / "server.properties"

    @property
    def exited(self) -> bool:
        return self.process is not None and self.process.poll() is not None


@dataclass
class KafkaCluster:
    root: Path  # <home>/kafka
    cluster_id: str
    distribution: Distribution
    heap_mb: int
    security: BrokerSecurity | None = None
    client: dict[str, str] = field(default_factory=dict)  # how toolgate up's admin connects
    nodes: list[KafkaNode] = field(default_factory=list)

    @property
    def bootstrap(self) -> str:
        return ",".join(node.address for node in self.nodes)

    @property
    def replication(self) -> Replication:
        return Replication.for_brokers(len(self.nodes))

    def describe(self) -> dict[str, Any]:
        """What runtime.json says of the cluster (`broker_cluster`)."""
        described: dict[str, Any] = {
            "broker": "kafka",
            "version": self.distribution.version,
            "cluster_id": self.cluster_id,
            "nodes": {node.name: node.address for node in self.nodes},
        }
        if self.security is not None:
            described["security"] = {
                "protocol": "SASL_SSL",
                "ssl_cafile": str(self.security.certificates.ca),
            }
        return described

    def pids(self) -> dict[str, int]:
        return {node.name: node.process.pid for node in self.nodes if node.process is not None}

    def spawn(self, node: KafkaNode) -> None:
        """Start `node`'s JVM (once the one before it let go of its data directory)."""
        await_unlocked(node.data / ".lock", STOP_S)
        node.log_path.parent.mkdir(parents=True, exist_ok=True)
        argv = [
            java(),
            f"-Xms{self.heap_mb}m",
            f"-Xmx{self.heap_mb}m",
            *JVM_FLAGS,
            *self.distribution.node_options(),
            f"-Dlog4j2.configurationFile={self.root / 'log4j2.properties'}",
            "-cp",
            self.distribution.classpath,
            "kafka.Kafka",
            str(node.properties),
        ]
        with open(node.log_path, "ab") as log:
            node.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
        node.started_at = time.monotonic()

    def revive(self, say: Callable[[str], None]) -> list[str]:
        """Start again every node that died, all at once, on its ports and with its data, and
        return without waiting for any (a crash loop backs off, as `toolgate up`'s workers do);
        the names of those started. A combined node serves only once a majority of the
        controllers run: nodes brought back one after another, each awaited before the next,
        would each wait alone for a quorum until Kafka gives up its registration, and the
        supervisor, which also restarts the workers, would wait with them."""
        now, started = time.monotonic(), []
        for node in self.nodes:
            if not node.exited or now < node.next_start:
                continue
            assert node.process is not None
            node.restarts = 1 if now - node.started_at > STABLE_AFTER_S else node.restarts + 1
            node.next_start = now + min(30.0, 0.5 * 2 ** min(node.restarts - 1, 6))
            say(f"{node.name} exited with {node.process.returncode}; restarting on port {node.port} (its data kept)")
            self.spawn(node)
            node.returning = True
            started.append(node.name)
        for node in self.nodes:
            if node.returning and not node.exited and listening(node.port):
                node.returning = False
                say(f"{node.name} serves again on port {node.port}")
        return started

    def stop(self) -> None:
        """Stop every node at once (one by one, the last would wait for a quorum that is gone)."""
        running = [n.process for n in self.nodes if n.process is not None and n.process.poll() is None]
        for process in running:
            process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_S
        for process in running:
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def start_cluster(
    home: Path,
    nodes: int,
    claim: Callable[[str], int],
    distribution: Distribution,
    heap_mb: int = 512,
    security: BrokerSecurity | None = None,
    client: dict[str, str] | None = None,
) -> KafkaCluster:
    """The home's Kafka cluster of `nodes` nodes, formatted at its first start, each node on the
    ports `claim` gives for its name (and `<name>-controller`, secured `<name>-internal` too);
    returns once every node serves (asked as `client`, the admin's settings when secured)."""
    root = home / "kafka"
    cluster_id = kept_cluster_id(root, nodes, distribution.version, security is not None)
    cluster = KafkaCluster(root, cluster_id, distribution, heap_mb, security, dict(client or {}))
    for node_id in range(1, nodes + 1):
        name = f"{NODE}{node_id}"
        ports = claim(name), claim(f"{name}-controller")
        node = KafkaNode(node_id, *ports, root / f"node-{node_id}", home / "logs" / f"{name}.log")
        node.internal_port = claim(f"{name}-internal") if security is not None else 0
        cluster.nodes.append(node)
    every = {node.node_id: (node.port, node.controller_port) for node in cluster.nodes}
    (root / "log4j2.properties").write_text(LOG4J2)
    for node in cluster.nodes:
        node.directory.mkdir(parents=True, exist_ok=True)
        text = node_properties(node.node_id, every, node.data, security, node.internal_port)
        write_private(node.properties, text)  # secured, it holds the nodes' own password
    format_storage(cluster, READY_S)
    for node in cluster.nodes:
        cluster.spawn(node)
    try:
        _await_serving(cluster, READY_S)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _await_serving(cluster: KafkaCluster, timeout: float) -> None:
    """Wait until every node listens and the cluster's metadata lists every one of them."""
    from confluent_kafka.admin import AdminClient

    deadline = time.monotonic() + timeout
    for node in cluster.nodes:
        assert node.process is not None
        try:
            wait_for_port(node.port, max(0.1, deadline - time.monotonic()), node.process)
        except (RuntimeError, TimeoutError) as exc:
            raise SystemExit(f"toolgate: Kafka node {node.name} did not start: {exc}; see {node.log_path}") from None
    admin = AdminClient({**cluster.client, "bootstrap.servers": cluster.bootstrap, "log_level": 0})
    serving: set[int] = set()
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):  # not answering yet: asked again
            serving = set(admin.list_topics(timeout=1.0).brokers)
        if serving >= {node.node_id for node in cluster.nodes}:
            return
        for node in cluster.nodes:
            if node.exited:
                raise SystemExit(f"toolgate: Kafka node {node.name} exited while starting; see {node.log_path}")
        time.sleep(0.2)
    raise SystemExit(f"toolgate: the Kafka cluster serves nodes {sorted(serving)} only after {timeout:g} s")
