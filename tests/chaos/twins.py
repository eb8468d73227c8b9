"""A second worker of every stage that consumes, beside `toolgate up`'s (TOOLGATE_CHAOS_TWINS=1).

Scaling out is more worker processes of a stage in its consumer group. A twin is started with
the environment `toolgate up` gave the first worker of its stage (read from /proc: the same
broker, database, credentials and crash points), so the two share the group's partitions, and
every kill of a worker, of a broker's leader, of every node and of `toolgate up` itself meets a
group of two. A twin outlives `toolgate up` (it is this test's child); one that exits (a crash
point fired in it) is started again here, as `toolgate up` restarts its own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

STAGES = ("validation", "policy", "approval-wait", "execution", "normalization")
ENABLED = os.environ.get("TOOLGATE_CHAOS_TWINS") == "1"


def environment_of(pid: int) -> dict[str, str]:
    """The environment a running process was started with (Linux)."""
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    pairs = (item.decode(errors="replace").split("=", 1) for item in raw.split(b"\0") if b"=" in item)
    return dict(pairs)


class Twins:
    def __init__(self, home: Path) -> None:
        self.home = home
        self.env: dict[str, dict[str, str]] = {}
        self.running: dict[str, subprocess.Popen[bytes]] = {}
        self.started: Counter[str] = Counter()

    def start(self) -> None:
        workers = json.loads((self.home / "runtime.json").read_text())["workers"]
        for stage in STAGES:
            self.env[stage] = environment_of(int(workers[stage]))
            self._spawn(stage)

    def tend(self) -> None:
        """Start again every twin that exited."""
        for stage, process in list(self.running.items()):
            if process.poll() is not None:
                self._spawn(stage)

    def restarts(self) -> dict[str, int]:
        return {stage: n - 1 for stage, n in self.started.items() if n > 1}

    def stop(self) -> None:
        for process in self.running.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.running.values():
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def _spawn(self, stage: str) -> None:
        with open(self.home / "logs" / f"{stage}-twin.log", "ab") as log:
            self.running[stage] = subprocess.Popen(
                [sys.executable, "-m", "toolgate.cli", "worker", stage],
                env=self.env[stage],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.started[stage] += 1
