"""The transient-retry helper: its delays as a table, and what it retries and what it does not."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import psycopg
import pytest

from toolgate.workers.runtime.transient import RELAY, ROUND, RetryPolicy, TransientRetry, next_delay

EXECUTION_RECORD = RetryPolicy(base_s=0.1, cap_s=5.0)  # what execution's record phase does today


@pytest.mark.parametrize(
    ("policy", "attempt", "draw", "delay"),
    [
        # rounds: 0.1 * 2^n, capped at 10 s, then x [0.5, 1.5)
        (ROUND, 1, 0.5, 0.2),
        (ROUND, 2, 0.5, 0.4),
        (ROUND, 3, 0.5, 0.8),
        (ROUND, 6, 0.5, 6.4),
        (ROUND, 7, 0.5, 10.0),
        (ROUND, 10_000, 0.5, 10.0),
        (ROUND, 1, 0.0, 0.1),
        (ROUND, 1, 0.999, 0.2 * 1.499),
        (ROUND, 7, 0.0, 5.0),
        # the outbox relay: a second, every time
        (RELAY, 1, 0.5, 1.0),
        (RELAY, 50, 0.0, 1.0),
        (RELAY, 50, 0.99, 1.0),
        # execution's recording loop: 0.2, 0.4, ... up to 5 s, no jitter
        (EXECUTION_RECORD, 1, 0.3, 0.2),
        (EXECUTION_RECORD, 4, 0.3, 1.6),
        (EXECUTION_RECORD, 5, 0.3, 3.2),
        (EXECUTION_RECORD, 6, 0.3, 5.0),
        (EXECUTION_RECORD, 60, 0.3, 5.0),
        # the exponent stops growing at max_exponent even under a high cap
        (RetryPolicy(base_s=1.0, cap_s=1e9, max_exponent=3), 20, 0.5, 8.0),
        (RetryPolicy(base_s=0.0, cap_s=10.0), 4, 0.9, 0.0),
    ],
)
def test_next_delay(policy: RetryPolicy, attempt: int, draw: float, delay: float) -> None:
    assert next_delay(policy, attempt, draw) == pytest.approx(delay)


@pytest.mark.parametrize(
    "fields",
    [
        {"base_s": -0.1, "cap_s": 1.0},
        {"base_s": 0.1, "cap_s": -1.0},
        {"base_s": 0.1, "cap_s": 1.0, "max_exponent": -1},
        {"base_s": 0.1, "cap_s": 1.0, "jitter": 1.5},
        {"base_s": 0.1, "cap_s": 1.0, "jitter": -0.1},
    ],
)
def test_a_policy_that_cannot_be_is_refused(fields: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        RetryPolicy(**fields)


def test_attempts_count_from_one() -> None:
    with pytest.raises(ValueError):
        next_delay(ROUND, 0)


class Flaky:
    """Fails with each of `errors` in turn, then answers 'done'."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "done"


def retry(slept: list[float]) -> TransientRetry:
    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    return TransientRetry(
        ROUND, logging.getLogger("test.transient"), "retrying", {"stage": "unit"}, sleep=sleep, draw=lambda: 0.5
    )


def test_transient_failures_are_retried_with_growing_pauses_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    slept: list[float] = []
    work = Flaky(psycopg.OperationalError("server closed the connection"), ConnectionError("reset"))
    with caplog.at_level(logging.WARNING, "test.transient"):
        assert asyncio.run(retry(slept).run(work)) == "done"
    assert work.calls == 3
    assert slept == pytest.approx([0.2, 0.4])
    logged = [(r.getMessage(), r.__dict__["stage"], r.__dict__["action"], r.__dict__["count"]) for r in caplog.records]
    assert logged == [("retrying", "unit", "retry", 1), ("retrying", "unit", "retry", 2)]


def test_a_failure_that_is_not_transient_propagates_at_once() -> None:
    slept: list[float] = []
    work = Flaky(ValueError("bad data"))
    with pytest.raises(ValueError, match="bad data"):
        asyncio.run(retry(slept).run(work))
    assert work.calls == 1 and slept == []


def test_a_transient_then_permanent_failure_propagates_the_permanent_one() -> None:
    slept: list[float] = []
    work = Flaky(TimeoutError(), KeyError("gone"))
    with pytest.raises(KeyError):
        asyncio.run(retry(slept).run(work))
    assert work.calls == 2 and slept == pytest.approx([0.2])
