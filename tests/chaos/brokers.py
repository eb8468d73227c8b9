"""What the chaos suite kills of the broker, by the broker the session runs on.

On the embedded Tansu (one node, memory only): the broker, which comes back empty, and toolgate
up re-drives what Postgres holds. On Apache Kafka's three nodes, which keep their data:

* `leader`: the node leading the most partitions of toolgate's topics (the busiest, since every
  call crosses every topic), SIGKILLed; its partitions elect new leaders among the in-sync
  replicas, and toolgate up starts the node again with its data. Every partition it led is a
  leader change the stages' clients must follow.
* `leader+worker`: the same, and a stage worker killed while the election runs.
* `every broker`: all three nodes SIGKILLed at once; toolgate up starts them again, each with
  its data, and nothing is re-driven (healing from Postgres is the embedded broker's, never a
  persistent cluster's).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections import Counter
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

NODE = "kafka-"


def victims(broker: str) -> list[str]:
    """The broker's victims in one chaos round."""
    return ["broker"] if broker == "tansu" else ["leader", "leader+worker", "every broker"]


def _runtime(home: Path) -> dict[str, dict[str, int]]:
    return json.loads((home / "runtime.json").read_text())


def _nodes(home: Path) -> dict[str, int]:
    return {name: pid for name, pid in _runtime(home)["infrastructure"].items() if name.startswith(NODE)}


def leaders(bootstrap: str, client_config: dict[str, str], timeout: float = 90.0) -> Counter[int]:
    """How many partitions of toolgate's topics each node leads now (asked again while no node
    answers: one killed before may still be coming back)."""
    admin = AdminClient({**client_config, "bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while True:
        try:
            topics = admin.list_topics(timeout=10).topics
            break
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(1.0)
    return Counter(
        p.leader
        for name, topic in topics.items()
        if name.startswith("tool.")
        for p in topic.partitions.values()
        if p.leader >= 0
    )


def kill_leader(home: Path, bootstrap: str, client_config: dict[str, str]) -> int:
    """SIGKILL the node leading the most partitions; how many it led (each now changes leader)."""
    led = leaders(bootstrap, client_config)
    if not led:
        return 0
    node, count = led.most_common(1)[0]
    with contextlib.suppress(ProcessLookupError):
        os.kill(_nodes(home)[f"{NODE}{node}"], signal.SIGKILL)
    return count


def kill_every_node(home: Path, nodes: int, timeout: float = 120.0) -> int:
    """SIGKILL every node at once, once all `nodes` run (one killed earlier may still be coming
    back: toolgate up records its new pid when it started it); how many were killed."""
    deadline = time.monotonic() + timeout
    running = [pid for pid in _nodes(home).values() if _alive(pid)]
    while len(running) < nodes and time.monotonic() < deadline:
        time.sleep(0.5)
        running = [pid for pid in _nodes(home).values() if _alive(pid)]
    killed = 0
    for pid in running:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
            killed += 1
    return killed


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a process that exited but was not yet reaped does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def await_serving(bootstrap: str, client_config: dict[str, str], nodes: int, timeout: float = 120.0) -> None:
    """Wait until every node is back in the cluster's metadata (toolgate up restarts them)."""
    admin = AdminClient({**client_config, "bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            if len(admin.list_topics(timeout=2).brokers) >= nodes:
                return
        time.sleep(0.5)
