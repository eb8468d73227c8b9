"""The wall clock, read here and passed on: a decision is given the time, it never reads it."""

from __future__ import annotations

import time


def now_ms() -> int:
    """Milliseconds since the epoch."""
    return int(time.time() * 1000)
