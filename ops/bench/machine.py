"""What the whole machine's CPU did during a benchmark run: busy, idle, or taken by the
hypervisor (steal), from the first line of /proc/stat.

CPU per call says what a call costs only while the machine has CPU to spare. A stage that
finds more calls waiting runs bigger rounds and spends less per call, so on a saturated
machine (idle near zero) CPU per call is what the machine had to give divided by the rate,
not what a call needs. And on a virtual machine a busy host takes CPU from this one (steal):
the same run is slower without any process using more. The benchmark reports these shares
beside its figures, so that runs can be compared.

And how fast the machine ran a fixed piece of Python work just before and just after the run
(`probe_ms`: this thread's CPU time for it, the median of a few tries, so waiting for a core does
not count). A virtual machine's host can make every process slower without taking CPU from it
(steal): on this project's machine the same code at full speed cost markedly more CPU a call in
one run than in the run two minutes before it, every process alike, with next to no steal
(docs/performance.md, "Figures behind the code").

And which Python ran the client (and the workers, when `toolgate up` was started from the same
environment): builds differ. On this project's machine the stages took less CPU a call on
Debian's python3.11 (optimized with PGO and LTO, libpython linked into the executable) than on
pyenv's default build of 3.11.7 (neither, libpython a shared library)
(docs/performance.md, "Figures behind the code").
"""

from __future__ import annotations

import hashlib
import os
import platform
import statistics
import sys
import time
from pathlib import Path

STAT = Path("/proc/stat")
# The fields of the aggregate "cpu" line, in order (proc(5)); guest time is already in user.
FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
BUSY = ("user", "nice", "system", "irq", "softirq")
PROBE_TRIES = 9
PROBE_ROUNDS = 6_000  # milliseconds of CPU a try (docs/performance.md, "Figures behind the code")


def cpu_times(stat_text: str) -> dict[str, int]:
    """The aggregate CPU line of /proc/stat's text, in clock ticks by field."""
    for line in stat_text.splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            values = [int(v) for v in parts[1 : 1 + len(FIELDS)]]
            return dict(zip(FIELDS, values + [0] * (len(FIELDS) - len(values)), strict=True))
    raise ValueError("no aggregate cpu line in /proc/stat")


def shares(start: dict[str, int], end: dict[str, int]) -> dict[str, float]:
    """Busy, idle (iowait included) and steal, as fractions of all CPU time between two readings."""
    delta = {name: end[name] - start[name] for name in FIELDS}
    total = sum(delta.values()) or 1
    return {
        "busy": round(sum(delta[name] for name in BUSY) / total, 3),
        "idle": round((delta["idle"] + delta["iowait"]) / total, 3),
        "steal": round(delta["steal"] / total, 3),
    }


def probe_ms(tries: int = PROBE_TRIES, rounds: int = PROBE_ROUNDS) -> float:
    """This thread's CPU time, in ms, for a fixed piece of work of the kind the stages do (small
    dicts and strings, a hash): the median of `tries`."""
    times = []
    for _ in range(tries):
        started = time.thread_time()
        probe_work(rounds)
        times.append((time.thread_time() - started) * 1000)
    return round(statistics.median(times), 2)


def probe_work(rounds: int) -> None:
    digest = b""
    for i in range(rounds):
        record = {"call_id": f"call_{i:08d}", "tool": "invoice.create_draft", "attempt": i % 3}
        text = ",".join(f"{key}={value}" for key, value in sorted(record.items()))
        digest = hashlib.sha256(digest + text.encode()).digest()


class MachineMeter:
    """Shares of this machine's CPU from its creation to `read()` (Linux), and the probe's time
    before and after."""

    def __init__(self, stat: Path = STAT) -> None:
        self.stat = stat
        self.probe_before = probe_ms()
        self.start = cpu_times(stat.read_text())

    def read(self) -> dict[str, float | int | str]:
        used = shares(self.start, cpu_times(self.stat.read_text()))
        return {
            "cores": os.cpu_count() or 1,
            **used,
            "probe_ms_before": self.probe_before,
            "probe_ms_after": probe_ms(),
            "python": interpreter(),
        }


def interpreter() -> str:
    """This process's Python: version, build and where its executable lives."""
    return f"{platform.python_version()} ({', '.join(platform.python_build())}) {os.path.realpath(sys.executable)}"
