"""The disk's writes the benchmark reports beside its figures (ops/bench/disk.py)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from toolgate.ops.bench.disk import SLOW_WRITE_MS, DiskMeter, DiskSummary, Writes, device_writes

# /proc/diskstats: major minor name, then reads (4 fields), then writes completed, merged,
# sectors, ms spent writing, ...
LINES = (
    "   7       0 loop0 10 0 20 1 0 0 0 0 0 4 1 0 0 0 0 0 0\n"
    " 254       0 vda 5000 10 90000 800 {writes} 300 700000 {ms} 0 9000 12000 0 0 0 0 0 0\n"
)


def stats(writes: int, ms: int) -> str:
    return LINES.format(writes=writes, ms=ms)


def test_the_device_is_found_by_its_numbers() -> None:
    assert device_writes(stats(120, 15), 254, 0) == Writes(completed=120, ms=15)
    assert device_writes(stats(120, 15), 254, 1) is None


def test_a_quarter_second_is_slow_when_its_writes_took_long_on_average() -> None:
    summary = DiskSummary()
    summary.add(Writes(0, 0), Writes(150, 15), 0.25)  # 0.1 ms a write: the disk as usual
    summary.add(Writes(150, 15), Writes(170, 215), 0.25)  # 20 writes, 200 ms: a stall
    summary.add(Writes(170, 215), Writes(170, 215), 0.25)  # nothing written
    report = summary.report("vda")
    assert report == {
        "device": "vda",
        "writes_per_s": round(170 / 0.75),
        "ms_per_write": round(215 / 170, 3),
        "slow_quarter_seconds": 1,
        "worst_quarter_second_ms_per_write": 10.0,
    }


def test_just_under_the_threshold_is_not_slow() -> None:
    summary = DiskSummary()
    summary.add(Writes(0, 0), Writes(100, int(100 * SLOW_WRITE_MS) - 1), 0.25)
    assert summary.slow_windows == 0


def home_line(path: Path) -> str:
    """A diskstats line for the device holding `path`, its writes and their ms to fill in."""
    dev = os.stat(path).st_dev
    return f" {os.major(dev)} {os.minor(dev)} home 1 0 2 3 {{writes}} 0 0 {{ms}} 0 0 0\n"


def test_the_meter_samples_the_home_s_device_until_read(tmp_path: Path) -> None:
    diskstats, line = tmp_path / "diskstats", home_line(tmp_path)
    diskstats.write_text(line.format(writes=1000, ms=100))
    meter = DiskMeter(tmp_path, diskstats, window_s=0.01)
    assert meter.device == "home"
    meter.start()
    diskstats.write_text(line.format(writes=1010, ms=600))  # 10 writes, 500 ms: a stall
    time.sleep(0.1)
    report = meter.read()
    assert report is not None
    assert report["slow_quarter_seconds"] == 1 and report["worst_quarter_second_ms_per_write"] == 50.0


def test_a_run_shorter_than_a_window_still_counts_its_writes(tmp_path: Path) -> None:
    diskstats, line = tmp_path / "diskstats", home_line(tmp_path)
    diskstats.write_text(line.format(writes=1000, ms=100))
    meter = DiskMeter(tmp_path, diskstats)  # a quarter second
    meter.start()
    diskstats.write_text(line.format(writes=1030, ms=103))
    report = meter.read()
    assert report is not None
    assert int(report["writes_per_s"]) > 30 and report["ms_per_write"] == 0.1


def test_a_device_not_in_diskstats_is_not_watched(tmp_path: Path) -> None:
    dev = os.stat(tmp_path).st_dev
    diskstats = tmp_path / "diskstats"
    diskstats.write_text(f" {os.major(dev) + 1} {os.minor(dev)} other 1 0 2 3 4 0 0 5 0 0 0\n")
    meter = DiskMeter(tmp_path, diskstats)
    meter.start()
    assert meter.device is None and meter.read() is None


def test_the_quarter_seconds_that_wrote_are_kept_with_when_they_ended() -> None:
    summary = DiskSummary()
    summary.add(Writes(0, 0), Writes(150, 15), 0.25, ended=10.25)
    summary.add(Writes(150, 15), Writes(150, 15), 0.25, ended=10.5)  # nothing written: nothing kept
    summary.add(Writes(150, 15), Writes(170, 215), 0.25, ended=10.75)
    assert summary.timeline == [(10.25, 0.1), (10.75, 10.0)]
