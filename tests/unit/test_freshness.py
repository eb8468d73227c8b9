"""How old a record between stages may be (workers/runtime/freshness.py): every row of its table."""

from __future__ import annotations

import pytest

from toolgate.settings import Settings
from toolgate.workers.runtime.freshness import Bound, stale

NOW = 1_800_000_000_000
BOUND = Bound(max_age_ms=900_000, future_ms=60_000)


@pytest.mark.parametrize(
    ("case", "produced_at_ms", "refused"),
    [
        ("produced now", NOW, False),
        ("as old as the bound", NOW - 900_000, False),
        ("a clock a little ahead", NOW + 60_000, False),
        ("older than the bound: a replay, or a backlog past it", NOW - 900_001, True),
        ("a day old (a captured record after its key's TTL)", NOW - 86_400_000, True),
        ("further ahead than the skew", NOW + 60_001, True),
        ("no time at all (a release before freshness)", 0, True),
        ("a negative time", -5, True),
    ],
)
def test_stale(case: str, produced_at_ms: int, refused: bool) -> None:
    reason = stale(produced_at_ms, NOW, BOUND)
    assert (reason is not None) is refused, case


def test_the_reason_says_how_old_and_the_bound() -> None:
    reason = stale(NOW - 86_400_000, NOW, BOUND)
    assert reason is not None and "86400 s ago" in reason and "900 s" in reason


def test_the_bound_comes_from_the_settings() -> None:
    bound = Bound.of(Settings(record_max_age_seconds=120, proposal_future_skew_seconds=5))
    assert bound == Bound(max_age_ms=120_000, future_ms=5_000)
