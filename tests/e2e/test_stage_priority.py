"""`toolgate up` runs the stages that take calls in at a lower priority than the others, so on one
machine a backlog waits before the pipeline rather than inside it (ops/priority.py)."""

from __future__ import annotations

import os

from toolgate.workers.stages import STAGES

from ..conftest import Pipeline


def test_validation_and_policy_yield_to_the_stages_that_finish_calls(pipeline: Pipeline) -> None:
    up = os.getpriority(os.PRIO_PROCESS, pipeline.process.pid)
    lowered = {stage: os.getpriority(os.PRIO_PROCESS, pipeline.worker_pid(stage)) - up for stage in STAGES}
    assert lowered == {
        "validation": 5,
        "policy": 5,
        "approval-wait": 0,
        "execution": 0,
        "outbox-relay": 0,
        "normalization": 0,
        "reconciliation": 0,
    }
    assert "ready (nice validation +5, policy +5)" in (pipeline.home / "up.out").read_text()
