"""The machine's CPU shares the benchmark reports beside its figures (ops/bench/machine.py)."""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path

import pytest

from toolgate.ops.bench.machine import MachineMeter, cpu_times, probe_ms, shares

BEFORE = "cpu  1000 10 500 8000 100 5 5 80 0 0\ncpu0 500 5 250 4000 50 2 3 40 0 0\nintr 1 2 3\n"
AFTER = "cpu  1600 10 800 8100 100 25 25 280 0 0\ncpu0 800 5 400 4050 50 12 13 140 0 0\nintr 4 5 6\n"


def test_shares_of_busy_idle_and_steal() -> None:
    # user 600 + system 300 + irq 20 + softirq 20 = 940 busy, idle 100, steal 200 of 1,240.
    got = shares(cpu_times(BEFORE), cpu_times(AFTER))
    assert got == {"busy": round(940 / 1240, 3), "idle": round(100 / 1240, 3), "steal": round(200 / 1240, 3)}


def test_a_kernel_without_steal_reads_as_none_stolen() -> None:
    old = cpu_times("cpu  1 2 3 4 5 6 7\n")
    assert old["steal"] == 0 and old["softirq"] == 7


def test_no_aggregate_line_is_an_error() -> None:
    with pytest.raises(ValueError):
        cpu_times("cpu0 1 2 3 4\n")


def test_the_meter_reads_between_creation_and_read(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    stat.write_text(BEFORE)
    meter = MachineMeter(stat)
    stat.write_text(AFTER)
    got = meter.read()
    assert got["steal"] == round(200 / 1240, 3) and int(got["cores"]) >= 1
    # Which Python ran it, so that runs on different builds are not compared as one.
    python = str(got["python"])
    assert python.startswith(platform.python_version())
    assert os.path.realpath(sys.executable) in python
    # And how fast the machine ran the probe just before and just after.
    assert float(got["probe_ms_before"]) > 0 and float(got["probe_ms_after"]) > 0


def test_the_probe_times_the_same_work_in_cpu_milliseconds() -> None:
    little, more = probe_ms(tries=3, rounds=500), probe_ms(tries=3, rounds=5_000)
    assert 0 < little < more
