"""Retrying work whose failure is transient: the input is fine, a dependency is not (yet).

A transient failure (`db.is_transient`: Postgres restarting, a dropped connection, a
serialization conflict, a timeout) is retried until the work goes through, after a pause that
grows exponentially up to a cap, with an optional jitter; every retry is logged with the
caller's fields. Any other exception propagates at once: it is the caller's to isolate or
answer. The policy is frozen data and `next_delay` a pure function of it; only `TransientRetry`
sleeps.

    policy                                   delays (s) for attempts 1, 2, 3, ...
    ROUND (rounds, delivery, audit writes)   0.2, 0.4, 0.8, ... capped at 10, each x [0.5, 1.5)
    RELAY (the outbox relay's round)         1, 1, 1, ...
    RECORD (execution's phase B)             0.2, 0.4, 0.8, ... capped at 5
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from toolgate.store.db import is_transient

T = TypeVar("T")
Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True)
class RetryPolicy:
    """How long to pause before retry `attempt` (1 for the first retry).

    The pause is `base_s * 2 ** min(attempt, max_exponent)`, at most `cap_s`, then scaled by a
    factor drawn from [1 - jitter, 1 + jitter).
    """

    base_s: float
    cap_s: float
    max_exponent: int = 10
    jitter: float = 0.0

    def __post_init__(self) -> None:
        if self.base_s < 0 or self.cap_s < 0 or self.max_exponent < 0 or not 0.0 <= self.jitter <= 1.0:
            raise ValueError(f"not a retry policy: {self}")


ROUND = RetryPolicy(base_s=0.1, cap_s=10.0, max_exponent=10, jitter=0.5)
RELAY = RetryPolicy(base_s=1.0, cap_s=1.0, max_exponent=0)
RECORD = RetryPolicy(base_s=0.1, cap_s=5.0)


def next_delay(policy: RetryPolicy, attempt: int, draw: float = 0.5) -> float:
    """Seconds to pause before retry `attempt` (>= 1); `draw` in [0, 1) picks the jitter
    (0.5, the default, is none)."""
    if attempt < 1:
        raise ValueError(f"attempt {attempt}: the first retry is attempt 1")
    delay = min(policy.cap_s, policy.base_s * 2.0 ** min(attempt, policy.max_exponent))
    return delay * (1.0 - policy.jitter + 2.0 * policy.jitter * draw)


@dataclass(frozen=True)
class TransientRetry:
    """Runs work again while it fails transiently, logging each retry with `fields`."""

    policy: RetryPolicy
    logger: logging.Logger
    message: str
    fields: Mapping[str, object] = field(default_factory=dict)
    level: int = logging.WARNING
    sleep: Sleep = asyncio.sleep
    draw: Callable[[], float] = random.random

    async def run(self, work: Callable[[], Awaitable[T]]) -> T:
        """`await work()` until it returns; a failure that is not transient propagates."""
        attempt = 0
        while True:
            try:
                return await work()
            except Exception as exc:
                if not is_transient(exc):
                    raise
                attempt += 1
                await self.pause(attempt, exc)

    async def pause(self, attempt: int, exc: BaseException) -> None:
        """Log retry `attempt` after `exc` and wait out its delay."""
        self.logger.log(
            self.level,
            self.message,
            extra={"action": "retry", **self.fields, "error": repr(exc), "count": attempt},
        )
        await self.sleep(next_delay(self.policy, attempt, self.draw()))
