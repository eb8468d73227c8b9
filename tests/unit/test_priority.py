"""Which stages `toolgate up` runs at a lower priority (ops/stack/priority.py): pure, and the setting."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from toolgate.ops.stack.priority import UPSTREAM, niceness
from toolgate.settings import load_settings
from toolgate.workers.stages import STAGES


def test_only_the_stages_that_take_calls_in_yield() -> None:
    assert {stage: niceness(stage, 5) for stage in STAGES} == {
        "validation": 5,
        "policy": 5,
        "approval-wait": 0,
        "execution": 0,
        "outbox-relay": 0,
        "normalization": 0,
        "reconciliation": 0,
    }
    assert set(STAGES) >= UPSTREAM


@pytest.mark.parametrize("configured", [0, -3])
def test_zero_or_less_runs_every_stage_alike(configured: int) -> None:
    # A stage is never raised above the others: that would take privileges, and starve them.
    assert {niceness(stage, configured) for stage in STAGES} == {0}


def test_the_setting_defaults_to_5_and_reads_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOOLGATE_UPSTREAM_NICE", raising=False)
    assert load_settings(use_runtime=False).upstream_nice == 5
    monkeypatch.setenv("TOOLGATE_UPSTREAM_NICE", "0")
    assert load_settings(use_runtime=False).upstream_nice == 0


def test_a_child_lowers_its_own_priority() -> None:
    code = "import os; from toolgate.ops.stack.priority import lower_priority; lower_priority(3); print(os.nice(0))"
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(child.stdout) == os.nice(0) + 3
