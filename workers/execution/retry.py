"""Deadlines and retries of one call's effect.

A call's deadline is the earliest of its contract's timeout, its timeout class's ceiling and
the proposal's own deadline: never unbounded. Retries are for failures that provably left no
effect (the provider was unreachable, or refused before acting: 429, 503, 409 in progress),
of tools that are idempotent by key, within the contract's retry budget and the deadline,
with exponential backoff and full jitter. An unknown outcome is never retried here: it is
held for the status query and reconciliation.

The policy is frozen data and the delay a pure function of it; tenacity only runs the loop.
"""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from tenacity import AsyncRetrying, RetryCallState, retry_if_result, stop_after_attempt

from toolgate.contracts.contract import Contract
from toolgate.workers.execution.executors import Effect, Failed

# The seeds' timeout classes: the most a call of the class may take.
TIMEOUT_CLASS_MS = {"interactive": 500, "standard": 5_000, "long_running": 300_000, "async": 3_600_000}


def deadline_for(contract: Contract, now_ms: int, proposal_deadline_ms: int | None) -> int:
    budget = min(contract.timeout_ms, TIMEOUT_CLASS_MS[contract.binding["timeout_class"]])
    deadline = now_ms + budget
    return min(deadline, proposal_deadline_ms) if proposal_deadline_ms is not None else deadline


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int
    base_ms: int = 50
    cap_ms: int = 2_000


def policy_for(contract: Contract) -> RetryPolicy:
    executor = contract.executor
    idempotent = (
        not contract.is_mutation
        or executor["kind"] == "postgres"
        or (executor["kind"] == "http" and bool(contract.document["idempotency"].get("key_header")))
    )
    return RetryPolicy(max_attempts=contract.max_retries + 1 if idempotent else 1)


def next_delay_ms(policy: RetryPolicy, attempt: int, jitter: float, retry_after_ms: int | None = None) -> int:
    """Full-jitter exponential backoff; a provider's Retry-After is a floor."""
    backoff = int(jitter * min(policy.cap_ms, policy.base_ms * 2 ** (attempt - 1)))
    return max(backoff, retry_after_ms or 0)


def retryable(effect: Effect) -> bool:
    return isinstance(effect, Failed) and not effect.final


async def with_retries(attempt_once: Callable[[], Awaitable[Effect]], policy: RetryPolicy, deadline_ms: int) -> Effect:
    delays: dict[int, float] = {}  # the delay chosen after each attempt, in seconds

    def delay(state: RetryCallState) -> float:
        if state.attempt_number not in delays:
            last = state.outcome.result() if state.outcome else None
            hint = last.retry_after_ms if isinstance(last, Failed) else None
            delays[state.attempt_number] = next_delay_ms(policy, state.attempt_number, random.random(), hint) / 1000
        return delays[state.attempt_number]

    def stop(state: RetryCallState) -> bool:
        if stop_after_attempt(policy.max_attempts)(state):
            return True
        return time.time() + delay(state) >= deadline_ms / 1000  # no retry may start past the deadline

    def last_effect(state: RetryCallState) -> Any:
        return state.outcome.result() if state.outcome else None

    async def attempt() -> Effect:
        return await attempt_once()

    retrying = AsyncRetrying(retry=retry_if_result(retryable), stop=stop, wait=delay, retry_error_callback=last_effect)
    effect: Effect = await retrying(attempt)
    return effect
