"""`toolgate status` against the session's running pipeline, run as an operator runs it.

The unhealthy case is made on a scratch home whose runtime file names a process that is gone,
beside the real broker and Postgres: nothing the other tests share is stopped or written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from toolgate.workers.stages import STAGES

from ..conftest import Pipeline

POSTGRES_ONLY = ("outbox-relay", "reconciliation")


def status(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolgate.cli", "status", *args],
        env={**env, "COLUMNS": "200"},  # rich wraps at 80 columns without a terminal
        capture_output=True,
        text=True,
        timeout=90,
    )


def committed(report: dict[str, Any]) -> bool:
    """Whether every consuming stage's group has committed an offset (librdkafka commits what a
    stage stored once a second: a call answered a moment ago may not be committed yet)."""
    return all(s["lag"]["committed_partitions"] >= 1 for s in report["stages"] if s["name"] not in POSTGRES_ONLY)


def healthy_report(pipeline: Pipeline, timeout: float = 60.0) -> dict[str, Any]:
    """The JSON report once status exits 0 and every group has committed: a worker an earlier
    test killed may be restarting."""
    deadline = time.monotonic() + timeout
    while True:
        done = status(pipeline.env, "--json")
        report: dict[str, Any] = json.loads(done.stdout)
        if (done.returncode == 0 and committed(report)) or time.monotonic() > deadline:
            assert done.returncode == 0, report["findings"]
            return report
        time.sleep(1.0)


def test_a_healthy_pipeline_lists_every_stage_running_with_its_consumer_lag(pipeline: Pipeline) -> None:
    # One call through every stage, so every consuming stage's group has committed offsets.
    pipeline.call("invoice.fetch", {"invoice_id": "inv_acme0001"})
    report = healthy_report(pipeline)
    workers = pipeline.refresh_runtime()["workers"]

    assert report["healthy"] is True
    assert not [f for f in report["findings"] if f["severity"] == "unhealthy"]
    assert [s["name"] for s in report["stages"]] == list(STAGES)
    for stage in report["stages"]:
        assert stage["alive"] and stage["ready"], stage
        assert stage["pid"] == workers[stage["name"]]
        lag = stage["lag"]
        if stage["name"] in POSTGRES_ONLY:
            assert lag["records"] is None and lag["group"] is None, lag
        else:
            assert isinstance(lag["records"], int) and 0 <= lag["records"] <= report["limits"]["max_lag"], lag
            # The group status reads is the one the stage commits with.
            assert lag["committed_partitions"] >= 1 and lag["partitions"] >= 4, lag
    assert report["supervisor"]["alive"] and report["supervisor"]["pid"] == pipeline.process.pid
    assert {p["name"] for p in report["infrastructure"]} == {"broker", "postgres"}
    for part in ("keys", "approvals", "outbox", "dead_letters"):
        assert report[part] is not None, report["errors"]
    assert report["errors"] == {}

    human = status(pipeline.env)
    assert human.returncode == 0, human.stdout + human.stderr
    assert "healthy" in human.stdout and "none: reads Postgres" in human.stdout
    assert all(stage in human.stdout for stage in STAGES)


def test_a_stage_whose_process_is_gone_makes_status_exit_1_and_say_which(pipeline: Pipeline, tmp_path: Path) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()  # reaped: its pid runs nothing now
    runtime = pipeline.refresh_runtime()
    scratch = {**runtime, "workers": {**runtime["workers"], "execution": gone.pid}}
    (tmp_path / "runtime.json").write_text(json.dumps(scratch))
    # The real deployment secret (to check dead letters' MACs) and the real ready markers.
    for shared in ("secrets", "ready"):
        os.symlink(pipeline.home / shared, tmp_path / shared)
    env = {**pipeline.env, "TOOLGATE_HOME": str(tmp_path)}

    done = status(env, "--json")
    report = json.loads(done.stdout)
    assert done.returncode == 1, report
    assert report["healthy"] is False
    said = {"severity": "unhealthy", "subject": "execution", "reason": f"pid {gone.pid} is not running"}
    assert said in report["findings"]
    # Everything else is still read from the real broker and Postgres.
    assert report["errors"] == {}
    execution = next(s for s in report["stages"] if s["name"] == "execution")
    assert execution["alive"] is False and isinstance(execution["lag"]["records"], int)

    human = status(env)
    assert human.returncode == 1
    assert f"execution: pid {gone.pid} is not running" in human.stdout
    assert "unhealthy" in human.stdout
