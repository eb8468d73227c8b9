"""A stage whose Kafka consumer stopped answering ends itself, so that `toolgate up` (or any
supervisor) starts it afresh.

A stage waits for records at most a second at a time (workers/runtime/consumer.py). Seen in the
chaos suite, after the broker came back empty and the consumer group was rejoined, the consumer
the stages ran on before stopped waking for good while the process stayed alive, ready, and
holding its partitions, so nothing downstream ever came again. A process that does not consume
must not look alive: a wait for records still unanswered after STUCK_S ends the process, and
its uncommitted rounds come again to its successor, as after any crash.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Protocol

log = logging.getLogger("toolgate.worker")
STUCK_S = 60.0
EXIT_STUCK = 72


class Waiting(Protocol):
    @property
    def waiting_since(self) -> float: ...


def stuck(waiting_since: float, now: float, limit_s: float = STUCK_S) -> bool:
    """Whether a wait for records that began at `waiting_since` (0: none is in flight) is stuck."""
    return waiting_since > 0 and now - waiting_since > limit_s


async def watch(consumer: Waiting, stage: str, poll_s: float = 5.0, limit_s: float = STUCK_S) -> None:
    """Run in the stage's event loop: exit when the consumer's wait for records never returned."""
    while True:
        await asyncio.sleep(poll_s)
        since = consumer.waiting_since
        if stuck(since, time.monotonic(), limit_s):
            log.critical(
                "a wait for records has not returned for %.0f s: exiting to be restarted",
                time.monotonic() - since,
                extra={"stage": stage, "action": "consumer_stuck"},
            )
            os._exit(EXIT_STUCK)
