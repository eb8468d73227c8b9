"""`toolgate bench` against the real `toolgate up`: a run goes end to end, and its clock starts
only once every stage is ready (a run started while a stage was still joining its group measured
that stage's start: ops/bench/run.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.conftest import Pipeline
from toolgate.ops.bench.disk import device_writes


def test_a_bench_run_drives_every_call_through(pipeline: Pipeline) -> None:
    done = pipeline.cli("bench", "--calls", "20", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["observed"], report["missing"], report["errors"], report["unsigned_observations"]) == (20, 0, 0, 0)
    assert 0.0 <= report["waited_for_stages_s"] < 1.0  # every stage had long been ready
    assert report["hops"]["observation"]["calls"] == 20
    # The slowest hundredth (one call of 20), the second it was published in.
    tail = report["tail"]
    assert tail["calls"] == 1 and tail["seconds"] == 1
    (worst,) = tail["worst"]
    assert worst["calls"] == 1 and worst["max_ms"] == report["max_ms"]


def test_a_bench_run_with_cpu_reports_every_process_the_machine_and_the_disk(pipeline: Pipeline) -> None:
    done = pipeline.cli("bench", "--calls", "20", "--cpu", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    used = report["cpu_us_per_call"]
    brokers = set(pipeline.runtime["broker_cluster"]["nodes"])  # Tansu's "broker", or "kafka-1"...
    assert brokers and {"validation", "execution", "postgres", "bench client"} | brokers <= set(used)
    assert report["cpu_us_per_call_total"] == sum(used.values()) > 0
    machine = report["machine"]
    assert machine["probe_ms_before"] > 0 and machine["probe_ms_after"] > 0
    # And during the run, once a second from a process of its own (its first sample taken even
    # when the run ended sooner).
    during = machine["probe_ms_during"]
    assert during["samples"] >= 1 and during["median"] > 0 and during["slow_seconds"] >= 0
    # The home's disk, where /proc/diskstats lists it (not an overlay or tmpfs, whose device it
    # does not list): every stage's commits wrote to it during the run.
    dev = os.stat(pipeline.home).st_dev
    if device_writes(Path("/proc/diskstats").read_text(), os.major(dev), os.minor(dev)) is not None:
        assert report["disk"]["writes_per_s"] > 0 and report["disk"]["ms_per_write"] >= 0
        assert report["tail"]["worst"][0]["disk_worst_ms_per_write"] >= 0
    else:
        assert "disk" not in report
    # The machine's speed beside the slowest call, when a sample came within a second of it (the
    # probe process takes its first as it starts, about when the run does).
    near = report["tail"]["worst"][0]["probe_slowest_ms"]
    assert near is None or near > 0


def test_a_bench_run_waits_for_a_stage_that_is_not_ready(pipeline: Pipeline) -> None:
    pid = pipeline.worker_pid("execution")
    (marker,) = (pipeline.home / "ready").glob(f"*execution.{pid}")
    hidden = marker.with_name(marker.name + ".hidden")
    marker.rename(hidden)
    try:
        refused = pipeline.cli("bench", "--calls", "5", "--ready-timeout", "1", "--json")
    finally:
        hidden.rename(marker)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "stages not ready after 1 s: execution" in refused.stdout
