"""What `toolgate bench --cpu` measures beside the calls (ops/bench/run.py drives them)."""

from __future__ import annotations

import json
import time
from typing import Any

from toolgate.ops.bench.cpu import CpuMeter
from toolgate.ops.bench.disk import DiskMeter
from toolgate.ops.bench.machine import MachineMeter
from toolgate.ops.bench.speed import SpeedMeter
from toolgate.ops.bench.tail import Timeline
from toolgate.settings import Settings


class Meters:
    """What `--cpu` measures beside the calls, from the run's start to its end: each local
    process's CPU (with a runtime file of `toolgate up` here), the machine's shares and speed
    (before, during and after: `machine.py`, `speed.py`), and the writes of the disk under
    the home; and, once read, when the disk and the machine were slow (`timeline`), for the
    run's slowest calls (`tail.py`)."""

    def __init__(self, settings: Settings) -> None:
        runtime = settings.runtime_file
        self.processes = CpuMeter(json.loads(runtime.read_text())) if runtime.exists() else None
        self.machine = MachineMeter()
        self.speed = SpeedMeter()
        self.speed.start()
        self.disk = DiskMeter(settings.home) if settings.home.exists() else None
        if self.disk is not None:
            self.disk.start()
        self.client_cpu = 0.0
        self.timeline = Timeline()

    def begin(self) -> None:
        """The client's CPU counts from here (its heap settled)."""
        self.client_cpu = time.process_time()

    def read(self, calls: int) -> dict[str, Any]:
        measured: dict[str, Any] = {}
        if self.processes is not None:
            client = round(1e6 * (time.process_time() - self.client_cpu) / calls)
            used = {**self.processes.per_call_us(calls), "bench client": client}
            measured["cpu_us_per_call"] = used
            measured["cpu_us_per_call_total"] = sum(used.values())
        speed = self.speed.read()  # stopped before the probe after the run, not beside it
        measured["machine"] = {**self.machine.read(), "probe_ms_during": speed.report(self.machine.probe_before)}
        written: list[tuple[float, float]] = []
        if self.disk is not None and (disk := self.disk.read()) is not None:
            measured["disk"] = disk
            written = self.disk.summary.timeline
        self.timeline = Timeline(written, speed.timeline)
        return measured
