"""Compensating a call as an operator does, with `toolgate compensate CALL_ID --json`: the tests of
tests/e2e/test_pipeline.py, test_taxonomy_classes.py and test_taxonomy_coverage.py use these."""

from __future__ import annotations

import json
from typing import Any

from ..conftest import Pipeline


def compensate(pipeline: Pipeline, call_id: str) -> dict[str, Any]:
    """The command's answer (the compensation's `call_id` and its `observation`); it must succeed."""
    done = pipeline.cli("compensate", call_id, "--json")
    assert done.returncode == 0, done.stderr
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def compensate_twice(pipeline: Pipeline, call_id: str, undone: dict[str, Any]) -> None:
    """Compensating twice is one compensation: both answers are SUCCESS with the data `undone`,
    and the second is answered from the compensation's idempotency key."""
    for attempt in range(2):
        observation = compensate(pipeline, call_id)["observation"]
        assert observation["status"]["taxonomy_class"] == "SUCCESS"
        assert observation["result_payload"]["data"] == undone
        assert observation["execution_metadata"]["idempotency_hit"] is (attempt == 1)
