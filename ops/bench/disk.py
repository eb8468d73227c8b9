"""What the disk under the deployment's home did during a benchmark run: how long its writes
took, quarter second by quarter second, from /proc/diskstats.

Every stage commits each round to Postgres, and a commit waits for the write-ahead log's
`fdatasync`. On this project's virtual disk that write is usually quick, but now and then the
disk stalls for far longer, with nothing else writing (a bare `fdatasync` loop saw it too): every
stage waits on its commit meanwhile, and the calls queue. Runs of the same code at the same rate
differ widely in p99 with how many such stalls they met
(docs/performance.md, "Figures behind the code"); the benchmark reports the disk's stalls beside
its figures, so that runs can be compared.

/proc/diskstats (Documentation/admin-guide/iostats.rst) counts, per device, the writes completed
and the milliseconds they took in all, each write's time added when it completes. A quarter
second whose writes took `SLOW_WRITE_MS` or more on average is a slow one; the worst quarter
second's average says how slow.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

DISKSTATS = Path("/proc/diskstats")
WINDOW_S = 0.25
# Writes here average far below this in a quarter second, and above it in the stalls seen
# (docs/performance.md, "Figures behind the code").
SLOW_WRITE_MS = 2.0


@dataclass(frozen=True)
class Writes:
    """A device's cumulative write counters: writes completed, and the milliseconds they took."""

    completed: int
    ms: int


def _fields(diskstats_text: str, major: int, minor: int) -> list[str] | None:
    for line in diskstats_text.splitlines():
        fields = line.split()
        if len(fields) >= 11 and int(fields[0]) == major and int(fields[1]) == minor:
            return fields
    return None


def device_writes(diskstats_text: str, major: int, minor: int) -> Writes | None:
    """The write counters of device major:minor in /proc/diskstats's text (None: not listed)."""
    fields = _fields(diskstats_text, major, minor)
    return None if fields is None else Writes(completed=int(fields[7]), ms=int(fields[10]))


@dataclass
class DiskSummary:
    """Quarter seconds of a run, folded as they come; and, for those that wrote, when each
    ended (the monotonic clock, seconds) and its milliseconds a write (`timeline`), to set
    beside the run's slowest calls (ops/bench/tail.py)."""

    seconds: float = 0.0
    writes: int = 0
    write_ms: int = 0
    slow_windows: int = 0
    worst_ms_per_write: float = 0.0
    timeline: list[tuple[float, float]] = field(default_factory=list)

    def add(self, before: Writes, after: Writes, seconds: float, ended: float | None = None) -> None:
        writes, ms = after.completed - before.completed, after.ms - before.ms
        self.seconds += seconds
        self.writes += writes
        self.write_ms += ms
        if writes > 0:
            per_write = ms / writes
            if ended is not None:
                self.timeline.append((ended, per_write))
            self.worst_ms_per_write = max(self.worst_ms_per_write, per_write)
            if per_write >= SLOW_WRITE_MS:
                self.slow_windows += 1

    def report(self, device: str) -> dict[str, float | int | str]:
        return {
            "device": device,
            "writes_per_s": round(self.writes / self.seconds) if self.seconds else 0,
            "ms_per_write": round(self.write_ms / self.writes, 3) if self.writes else 0.0,
            "slow_quarter_seconds": self.slow_windows,
            "worst_quarter_second_ms_per_write": round(self.worst_ms_per_write, 1),
        }


class DiskMeter:
    """Samples the writes of the device holding `path` every quarter second, from `start()` to
    `read()`, in a thread of its own (Linux; where the device is not in diskstats, nothing)."""

    def __init__(self, path: Path, diskstats: Path = DISKSTATS, window_s: float = WINDOW_S) -> None:
        dev = os.stat(path).st_dev
        self.major, self.minor = os.major(dev), os.minor(dev)
        self.diskstats = diskstats
        self.window_s = window_s
        self.summary = DiskSummary()
        try:
            fields = _fields(diskstats.read_text(), self.major, self.minor)
        except OSError:
            fields = None
        self.device = None if fields is None else fields[2]
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """The first reading now, the next ones every window in the thread."""
        if self.device is not None:
            self._thread = threading.Thread(
                target=self._sample, args=(self._counters(),), name="bench-disk", daemon=True
            )
            self._thread.start()

    def read(self) -> dict[str, float | int | str] | None:
        """What the disk did since `start()` (None: not started, or no device to watch)."""
        if self._thread is None or self.device is None:
            return None
        self._stop.set()
        self._thread.join()
        return self.summary.report(self.device)

    def _counters(self) -> Writes | None:
        return device_writes(self.diskstats.read_text(), self.major, self.minor)

    def _sample(self, before: Writes | None) -> None:
        """Every window until stopped, and the part of one that the stop cut short."""
        since = time.monotonic()
        while before is not None:
            stopped = self._stop.wait(self.window_s)
            after, now = self._counters(), time.monotonic()
            if after is not None:
                self.summary.add(before, after, now - since, now)
            if stopped:
                return
            before, since = after, now
