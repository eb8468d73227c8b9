"""What `toolgate bench` waits for before its clock starts (ops/status.py `await_ready`): every
stage of the home's `toolgate up` running with its ready marker, the one a stage leaves once its
consumer's partitions are assigned. A run started before measured the stages' start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from toolgate.ops.status import NotReady, await_ready, unready_stages
from toolgate.settings import Settings
from toolgate.workers.stages import STAGES

PREFIX = "t1-"


def home_of(tmp_path: Path, workers: dict[str, int], ready: set[str]) -> Settings:
    """A home whose runtime file names `workers`, with ready markers for the stages in `ready`."""
    settings = Settings(home=tmp_path, topic_prefix=PREFIX)
    settings.runtime_file.write_text(json.dumps({"pid": os.getpid(), "workers": workers, "restarts": {}}))
    (tmp_path / "ready").mkdir()
    for stage in ready:
        mark(settings, stage, workers[stage])
    return settings


def mark(settings: Settings, stage: str, pid: int) -> None:
    (settings.home / "ready" / f"{PREFIX}{stage}.{pid}").touch()


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


class FakeTime:
    """A clock that `sleep` moves, and calls `on_sleep` with how often it slept."""

    def __init__(self, on_sleep: Callable[[int], object] = lambda n: None) -> None:
        self.now, self.sleeps, self.on_sleep = 100.0, 0, on_sleep

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.sleeps += 1
        self.on_sleep(self.sleeps)


def test_without_a_runtime_file_nothing_is_waited_for(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path)
    assert unready_stages(settings) is None
    fake = FakeTime()
    assert await_ready(settings, 5.0, clock=fake.clock, sleep=fake.sleep) == 0.0
    assert fake.sleeps == 0


def test_every_stage_ready_starts_at_once(tmp_path: Path) -> None:
    workers = {stage: os.getpid() for stage in STAGES}
    settings = home_of(tmp_path, workers, set(STAGES))
    assert unready_stages(settings) == ()
    fake = FakeTime()
    assert await_ready(settings, 5.0, clock=fake.clock, sleep=fake.sleep) == 0.0


def test_a_run_waits_for_the_stage_still_joining_its_group(tmp_path: Path) -> None:
    workers = {stage: os.getpid() for stage in STAGES}
    settings = home_of(tmp_path, workers, set(STAGES) - {"execution"})
    assert unready_stages(settings) == ("execution",)
    fake = FakeTime(on_sleep=lambda n: n == 3 and mark(settings, "execution", os.getpid()))
    waited = await_ready(settings, 5.0, clock=fake.clock, sleep=fake.sleep, poll_s=0.25)
    assert waited == pytest.approx(0.75)
    assert unready_stages(settings) == ()


def test_stages_never_ready_are_named_when_the_wait_runs_out(tmp_path: Path) -> None:
    workers = {stage: os.getpid() for stage in STAGES}
    settings = home_of(tmp_path, workers, set(STAGES) - {"policy", "normalization"})
    fake = FakeTime()
    with pytest.raises(NotReady, match="policy, normalization"):
        await_ready(settings, 2.0, clock=fake.clock, sleep=fake.sleep, poll_s=0.5)
    assert fake.now - 100.0 == pytest.approx(2.0)


def test_a_ready_marker_of_a_process_that_is_gone_does_not_count(tmp_path: Path) -> None:
    gone = dead_pid()
    workers = {stage: os.getpid() for stage in STAGES} | {"validation": gone}
    settings = home_of(tmp_path, workers, set(STAGES))
    assert unready_stages(settings) == ("validation",)


def test_a_stage_missing_from_the_runtime_file_is_not_ready(tmp_path: Path) -> None:
    workers = {stage: os.getpid() for stage in STAGES if stage != "approval-wait"}
    settings = home_of(tmp_path, workers, set(workers))
    assert unready_stages(settings) == ("approval-wait",)
