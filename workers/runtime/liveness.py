"""A stage whose Kafka consumer stopped waking up ends itself, so that `toolgate up` (or any
supervisor) starts it afresh.

Faust consumes in a thread of its own (mode's ServiceThread), whose event loop records when it
last woke. Seen in the chaos suite, after the broker came back empty and the consumer group
was rejoined: that thread stopped waking for good ("Thread keepalive is not responding")
while the process stayed alive, ready, and holding its partitions, so nothing downstream ever
came again. A process that does not consume must not look alive: after STUCK_S without a
wake-up it exits, and its uncommitted rounds come again to its successor, as after any crash.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any

log = logging.getLogger("toolgate.worker")
STUCK_S = 60.0
EXIT_STUCK = 72


def stuck(last_wakeup_at: float, now: float, limit_s: float = STUCK_S) -> bool:
    """Whether a consumer thread that last woke at `last_wakeup_at` (0: not started) is stuck."""
    return last_wakeup_at > 0 and now - last_wakeup_at > limit_s


async def watch(app: Any, stage: str, poll_s: float = 5.0, limit_s: float = STUCK_S) -> None:
    """Run in the stage's main loop: exit when the consumer thread stopped waking up."""
    while True:
        await asyncio.sleep(poll_s)
        thread = getattr(app.consumer, "_thread", None)
        if thread is not None and stuck(thread.last_wakeup_at, time.monotonic(), limit_s):
            log.critical(
                "consumer thread has not woken for %.0f s: exiting to be restarted",
                time.monotonic() - thread.last_wakeup_at,
                extra={"stage": stage, "action": "consumer_stuck"},
            )
            os._exit(EXIT_STUCK)
