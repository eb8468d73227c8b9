"""When a stage's wait for records counts as stuck (workers/runtime/liveness.py)."""

from __future__ import annotations

import pytest

from toolgate.workers.runtime.liveness import STUCK_S, stuck


@pytest.mark.parametrize(
    ("waiting_since", "now", "is_stuck"),
    [
        (0.0, 10_000.0, False),  # not started yet
        (100.0, 100.0 + STUCK_S - 1, False),
        (100.0, 100.0 + STUCK_S, False),
        (100.0, 100.0 + STUCK_S + 0.1, True),
    ],
)
def test_a_wait_for_records_is_stuck_only_after_the_limit(waiting_since: float, now: float, is_stuck: bool) -> None:
    assert stuck(waiting_since, now) is is_stuck
