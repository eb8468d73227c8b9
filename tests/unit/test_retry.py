"""Deadlines and retries of an effect (workers/execution/retry.py)."""

from __future__ import annotations

import asyncio
import time

from toolgate.contracts.registry import load_registry
from toolgate.schemas.models import TaxonomyClass
from toolgate.workers.execution.executors import Done, Effect, Unknown, failed
from toolgate.workers.execution.retry import (
    TIMEOUT_CLASS_MS,
    RetryPolicy,
    deadline_for,
    next_delay_ms,
    policy_for,
    retryable,
    with_retries,
)


def run(effects: list[Effect], policy: RetryPolicy, deadline_in_ms: int = 5_000) -> tuple[Effect, int]:
    calls = 0

    async def attempt() -> Effect:
        nonlocal calls
        calls += 1
        return effects[min(calls, len(effects)) - 1]

    effect = asyncio.run(with_retries(attempt, policy, int(time.time() * 1000) + deadline_in_ms))
    return effect, calls


NO_EFFECT = failed(TaxonomyClass.DEPENDENCY_UNAVAILABLE, "connect_failed", "down", final=False)


def test_a_coroutine_effect_is_awaited_and_returned() -> None:
    assert run([Done({"ok": 1})], RetryPolicy(3)) == (Done({"ok": 1}), 1)


def test_failures_without_effect_are_retried_until_success() -> None:
    effect, calls = run([NO_EFFECT, NO_EFFECT, Done({"ok": 1})], RetryPolicy(3, base_ms=1))
    assert (effect, calls) == (Done({"ok": 1}), 3)


def test_the_budget_bounds_retries_and_returns_the_last_failure() -> None:
    effect, calls = run([NO_EFFECT], RetryPolicy(2, base_ms=1))
    assert (effect, calls) == (NO_EFFECT, 2)


def test_final_failures_and_unknown_outcomes_are_never_retried() -> None:
    final = failed(TaxonomyClass.STALE_STATE, "not_found", "gone", final=True)
    assert run([final, Done({})], RetryPolicy(5, base_ms=1)) == (final, 1)
    assert run([Unknown("sent, no answer"), Done({})], RetryPolicy(5, base_ms=1)) == (Unknown("sent, no answer"), 1)
    assert not retryable(Unknown("x")) and retryable(NO_EFFECT)


def test_no_retry_can_start_past_the_deadline() -> None:
    busy = failed(TaxonomyClass.RATE_LIMITED, "provider_429", "busy", final=False, retry_after_ms=400)
    effect, calls = run([busy], RetryPolicy(10, base_ms=1), deadline_in_ms=100)  # retry-after > time left
    assert calls == 1 and effect == busy


def test_backoff_is_exponential_capped_jittered_and_respects_retry_after() -> None:
    policy = RetryPolicy(10, base_ms=50, cap_ms=1000)
    assert [next_delay_ms(policy, n, 1.0) for n in (1, 2, 3, 4, 5, 6)] == [50, 100, 200, 400, 800, 1000]
    assert next_delay_ms(policy, 3, 0.0) == 0
    assert next_delay_ms(policy, 1, 0.5, retry_after_ms=700) == 700


def test_deadlines_take_the_earliest_bound_and_retries_need_idempotency() -> None:
    registry = load_registry()
    fetch = registry.resolve("invoice.fetch", "latest")  # interactive: 500 ms ceiling
    assert deadline_for(fetch, 1_000, None) == 1_000 + min(fetch.timeout_ms, TIMEOUT_CLASS_MS["interactive"])
    assert deadline_for(fetch, 1_000, 1_200) == 1_200
    email = registry.resolve("notify.send_email", "latest")
    assert policy_for(email).max_attempts == email.max_retries + 1  # idempotent by key: retries allowed
