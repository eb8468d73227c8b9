"""What the whole machine's CPU did during a benchmark run: busy, idle, or taken by the
hypervisor (steal), from the first line of /proc/stat.

CPU per call says what a call costs only while the machine has CPU to spare. A stage that
finds more calls waiting runs bigger rounds and spends less per call, so on a saturated
machine (idle near zero) CPU per call is what the machine had to give divided by the rate,
not what a call needs. And on a virtual machine a busy host takes CPU from this one (steal):
the same run is slower without any process using more. The benchmark reports these shares
beside its figures, so that runs can be compared.

And which Python ran the client (and the workers, when `toolgate up` was started from the same
environment): builds differ. On this project's machine the stages took 8-13% less CPU a call
on Debian's python3.11 (optimized with PGO and LTO, libpython linked into the executable) than
on pyenv's default build of 3.11.7 (neither, libpython a shared library).
"""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path

STAT = Path("/proc/stat")
# The fields of the aggregate "cpu" line, in order (proc(5)); guest time is already in user.
FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
BUSY = ("user", "nice", "system", "irq", "softirq")


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


class MachineMeter:
    """Shares of this machine's CPU from its creation to `read()` (Linux)."""

    def __init__(self, stat: Path = STAT) -> None:
        self.stat = stat
        self.start = cpu_times(stat.read_text())

    def read(self) -> dict[str, float | int | str]:
        return {
            "cores": os.cpu_count() or 1,
            **shares(self.start, cpu_times(self.stat.read_text())),
            "python": interpreter(),
        }


def interpreter() -> str:
    """This process's Python: version, build and where its executable lives."""
    return f"{platform.python_version()} ({', '.join(platform.python_build())}) {os.path.realpath(sys.executable)}"
