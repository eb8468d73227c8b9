"""What an Apache Kafka node runs with (kafka_broker.py runs the nodes): its server.properties,
the cluster id kept in `cluster.json`, its storage formatted once (`format_storage`), its logging
and JVM flags, and which `java`."""

from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from toolgate.ops.kafka_credentials import BrokerSecurity
from toolgate.topics.catalog import Replication

if TYPE_CHECKING:
    from toolgate.ops.stack.kafka_broker import KafkaCluster

OFFSETS_PARTITIONS = 10
# C1 only: on a few shared cores C2's compiling cost a fresh node more CPU than its faster code
# gave back (docs/performance.md, "Kafka's nodes compile with C1 alone").
JIT = "-XX:TieredStopAtLevel=1"
# bin/kafka-run-class.sh's defaults (KAFKA_JVM_PERFORMANCE_OPTS) but the compiler, and no JVM
# kept alive by a broken heap.
JVM_FLAGS = (
    "-server",
    JIT,
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:MaxInlineLevel=15",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
)
LOG4J2 = """# toolgate: a Kafka node's log, to its stdout (logs/kafka-<i>.log)
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
# Every configuration's hundreds of values at every start: server.properties says them.
logger.config.name = org.apache.kafka.common.config.AbstractConfig
logger.config.level = WARN
"""


def new_cluster_id() -> str:
    """A cluster id as `kafka-storage random-uuid` makes one: a random UUID in URL-safe base64
    without padding, never starting with '-' (a command line would take it for an option)."""
    while True:
        made = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not made.startswith("-"):
            return made


def node_properties(
    node_id: int,
    ports: dict[int, tuple[int, int]],
    data: Path,
    security: BrokerSecurity | None = None,
    internal_port: int = 0,
) -> str:
    """server.properties of node `node_id` of a cluster whose nodes listen on `ports`
    (node id -> (client port, controller port)); secured (ops/kafka_credentials.py), its nodes
    talk to each other on `internal_port`."""
    port, controller = ports[node_id]
    replication = Replication.for_brokers(len(ports))
    voters = ",".join(f"{n}@127.0.0.1:{c}" for n, (_, c) in sorted(ports.items()))
    settings: dict[str, object] = {
        "node.id": node_id,
        "process.roles": "broker,controller",
        **_listeners(port, controller, internal_port if security is not None else None),
        "controller.quorum.voters": voters,
        "log.dirs": data,
        "default.replication.factor": replication.factor,
        "min.insync.replicas": replication.min_insync,
        "offsets.topic.replication.factor": replication.factor,
        "offsets.topic.num.partitions": OFFSETS_PARTITIONS,
        "transaction.state.log.replication.factor": replication.factor,
        "transaction.state.log.min.isr": replication.min_insync,
        "share.coordinator.state.topic.replication.factor": replication.factor,
        "share.coordinator.state.topic.min.isr": replication.min_insync,
        "auto.create.topics.enable": "false",
        "group.initial.rebalance.delay.ms": 0,
        **(security.properties() if security is not None else {}),
    }
    return "".join(f"{key}={value}\n" for key, value in settings.items())


def _listeners(port: int, controller: int, internal: int | None) -> dict[str, object]:
    """PLAINTEXT clients and controllers; or, secured, SASL_SSL on three listeners: clients',
    the nodes' among themselves, the controllers'."""
    if internal is None:
        return {
            "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
        }
    return {
        "listeners": f"CLIENT://127.0.0.1:{port},BROKER://127.0.0.1:{internal},CONTROLLER://127.0.0.1:{controller}",
        "advertised.listeners": f"CLIENT://127.0.0.1:{port},BROKER://127.0.0.1:{internal}",
        "listener.security.protocol.map": "CLIENT:SASL_SSL,BROKER:SASL_SSL,CONTROLLER:SASL_SSL",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "BROKER",
    }


def kept_cluster_id(root: Path, nodes: int, version: str, secure: bool = False) -> str:
    """The cluster id kept in `cluster.json` (made at the first start); a home made for another
    node count, or secured when it was not (or the other way), is refused."""
    path = root / "cluster.json"
    if path.exists():
        kept = json.loads(path.read_text())
        if kept["nodes"] != nodes:
            raise SystemExit(
                f"toolgate: the Kafka cluster in {root} has {kept['nodes']} node(s), not {nodes}: "
                f"start it with --brokers {kept['nodes']}, or start over with --fresh"
            )
        if bool(kept.get("secure", False)) != secure:
            was = "secured (--secure)" if kept.get("secure") else "not secured"
            raise SystemExit(f"toolgate: the Kafka cluster in {root} was made {was}: start it so, or with --fresh")
        return str(kept["cluster_id"])
    root.mkdir(parents=True, exist_ok=True)
    cluster_id = new_cluster_id()
    tmp = path.with_suffix(".tmp")
    made = {"cluster_id": cluster_id, "nodes": nodes, "version": version, "secure": secure}
    tmp.write_text(json.dumps(made, indent=2))
    tmp.replace(path)
    return cluster_id


def format_storage(cluster: KafkaCluster, timeout: float) -> None:
    """Format the storage of every node that has none yet (side by side: a JVM start each).
    Secured, the admin's SCRAM credential is written into it: its arguments go to the JVM in an
    argument file (0600, deleted after), so the password is never on a command line."""
    pending = [n for n in cluster.nodes if not (n.data / "meta.properties").exists()]
    extra = cluster.security.format_arguments() if cluster.security is not None else []
    formatting = []
    for node in pending:
        arguments = [
            "kafka.tools.StorageTool",
            "format",
            "--cluster-id",
            cluster.cluster_id,
            "--config",
            str(node.properties),
            *extra,
        ]
        argfile = node.directory / "format.args"
        write_private(argfile, "\n".join(f'"{a}"' for a in arguments) + "\n")
        process = subprocess.Popen(
            [
                java(),
                JIT,
                *cluster.distribution.sharing(),
                f"-Dlog4j2.configurationFile={cluster.root / 'log4j2.properties'}",
                "-cp",
                cluster.distribution.classpath,
                f"@{argfile}",  # the class to run and its arguments
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        formatting.append((node, argfile, process))
    for node, argfile, process in formatting:
        try:
            output, _ = process.communicate(timeout=timeout)
        finally:
            argfile.unlink(missing_ok=True)
        if process.returncode != 0:
            tail = "\n".join(output.decode(errors="replace").strip().splitlines()[-10:])
            raise SystemExit(f"toolgate: formatting {node.name}'s storage in {node.data} failed:\n{tail}")


def write_private(path: Path, text: str) -> None:
    """Write a file readable by its owner only (from its creation)."""
    tmp = path.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    tmp.replace(path)


def await_unlocked(lock: Path, timeout: float) -> None:
    """Wait while another process (a node of an earlier `toolgate up`, still shutting down)
    holds a node's data directory: Kafka locks `<log dir>/.lock` with a POSIX record lock."""
    if not lock.exists():
        return
    deadline = time.monotonic() + timeout
    with open(lock, "a") as held:
        while True:
            try:
                fcntl.lockf(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.lockf(held, fcntl.LOCK_UN)
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{lock} is still held after {timeout:g} s") from None
                time.sleep(0.2)


def java() -> str:
    """`$JAVA_HOME/bin/java` if JAVA_HOME is set, else the `java` on PATH (Kafka 4 needs 17+)."""
    java_home = os.environ.get("JAVA_HOME")
    found = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not found or not Path(found).exists():
        raise SystemExit("toolgate: --broker kafka needs Java 17 or later (`java` on PATH, or JAVA_HOME)")
    return found
