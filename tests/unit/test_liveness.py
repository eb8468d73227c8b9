"""When a stage's consumer thread counts as stuck (workers/runtime/liveness.py)."""

from __future__ import annotations

import pytest

from toolgate.workers.runtime.liveness import STUCK_S, stuck


@pytest.mark.parametrize(
    ("last_wakeup_at", "now", "is_stuck"),
    [
        (0.0, 10_000.0, False),  # not started yet
        (100.0, 100.0 + STUCK_S - 1, False),
        (100.0, 100.0 + STUCK_S, False),
        (100.0, 100.0 + STUCK_S + 0.1, True),
    ],
)
def test_a_consumer_thread_is_stuck_only_after_the_limit_without_a_wakeup(
    last_wakeup_at: float, now: float, is_stuck: bool
) -> None:
    assert stuck(last_wakeup_at, now) is is_stuck
