"""`toolgate up` runs the stages that take calls in at a lower priority than the others, so on one
machine a backlog waits before the pipeline rather than inside it (ops/stack/priority.py)."""

from __future__ import annotations

import os

from toolgate.ops.stack.priority import niceness
from toolgate.settings import Settings
from toolgate.workers.stages import STAGES

from ..conftest import Pipeline


def test_validation_and_policy_yield_to_the_stages_that_finish_calls(pipeline: Pipeline) -> None:
    up = os.getpriority(os.PRIO_PROCESS, pipeline.process.pid)
    lowered = {stage: os.getpriority(os.PRIO_PROCESS, pipeline.worker_pid(stage)) - up for stage in STAGES}
    assert lowered == {stage: niceness(stage, Settings().upstream_nice) for stage in STAGES}
    assert lowered["validation"] == lowered["policy"] == 5
    assert "ready (nice validation +5, policy +5)" in (pipeline.home / "up.out").read_text()
