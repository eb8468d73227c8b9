"""A stage process outlives no parent by more than a grace period.

`toolgate up` gives every worker a parent-death signal (SIGTERM), and a worker stops cleanly on
it. But a clean stop can hang when what it would say goodbye to is gone too (a broker killed
together with its supervisor): seen in the chaos suite, a worker lingering half an hour after
its `toolgate up` was SIGKILLed, still holding its consumer group's partitions and Postgres
connections. So a watchdog thread notices that the process was orphaned (its parent changed)
and, if it is still alive GRACE_S later, ends it without further cleanup: its uncommitted round
comes again to whoever runs next, as after any crash.
"""

from __future__ import annotations

import logging
import os
import threading
import time

log = logging.getLogger("toolgate.worker")
GRACE_S = 30.0
EXIT_ORPHANED = 71


def watch(poll_s: float = 1.0, grace_s: float = GRACE_S) -> threading.Thread:
    """Start the watchdog for this process (a daemon thread); returns it."""
    parent = os.getppid()

    def run() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        log.warning("orphaned: exiting in %.0f s unless stopped", grace_s, extra={"action": "orphaned"})
        time.sleep(grace_s)
        log.critical("orphaned and still running: exiting without cleanup", extra={"action": "orphan_exit"})
        os._exit(EXIT_ORPHANED)

    thread = threading.Thread(target=run, name="orphan-watchdog", daemon=True)
    thread.start()
    return thread
