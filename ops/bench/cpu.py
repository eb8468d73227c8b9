"""The CPU a local `toolgate up`'s processes spend, from /proc: per process, and its children.

`toolgate up` writes its processes' pids to runtime.json: the stage workers and the provider
(`workers`), the broker's nodes and Postgres (`infrastructure`), and itself (`pid`). A process
counts with its live descendants (Postgres serves each connection in a child) and the children it
reaped. `toolgate bench --cpu` divides what each spent by the calls of a run
(ops/bench/run.py); `toolgate bench --idle` by the seconds it watched (ops/bench/idle.py).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

SUPERVISOR = "toolgate up"  # the name the supervisor's own process is measured under


def cpu_seconds(pid: int) -> float:
    """User and system CPU of a process and its reaped children (Linux /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return sum(int(fields[i]) for i in (11, 12, 13, 14)) / os.sysconf("SC_CLK_TCK")


def tree(pid: int) -> list[int]:
    """A process and its live descendants."""
    children = Path(f"/proc/{pid}/task/{pid}/children")
    found = [pid]
    if children.exists():
        for child in children.read_text().split():
            found += tree(int(child))
    return found


def processes(runtime: dict[str, Any], supervisor: bool = False) -> dict[str, int]:
    """The processes of a runtime.json by name (and `toolgate up` itself, with `supervisor`)."""
    named = {**runtime.get("workers", {}), **runtime.get("infrastructure", {})}
    if supervisor and runtime.get("pid"):
        named[SUPERVISOR] = int(runtime["pid"])
    return named


class CpuMeter:
    """CPU seconds per local toolgate process (workers, broker, Postgres) since it was made."""

    def __init__(self, runtime: dict[str, Any], supervisor: bool = False) -> None:
        self.processes = processes(runtime, supervisor)
        self.start = self.sample()

    def sample(self) -> dict[str, float]:
        # The supervisor's own CPU only: its tree is every other process here.
        return {
            name: cpu_seconds(pid) if name == SUPERVISOR else sum(cpu_seconds(p) for p in tree(pid))
            for name, pid in self.processes.items()
        }

    def spent(self) -> dict[str, float]:
        """CPU seconds each process spent since the meter was made."""
        end = self.sample()
        return {name: end[name] - self.start[name] for name in self.processes}

    def per_call_us(self, calls: int) -> dict[str, int]:
        return {name: round(1e6 * used / max(calls, 1)) for name, used in self.spent().items()}
