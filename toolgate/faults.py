"""Named crash points, for the chaos suite: a process that reaches one may SIGKILL itself.

Off unless `TOOLGATE_FAULTS` is set, and then only at the points it names, each with the
chance of dying there, e.g.

    TOOLGATE_FAULTS="execution.after_http_effect=0.02,relay.during_publish=0.01"

The points are the moments where a crash is hardest to survive:

    execution.after_http_effect   an HTTP effect happened; the transaction that records it
                                  has not begun (reconciliation must find out what happened)
    execution.after_commit        execution committed a round's results; it has not published
                                  them (the relay does, when their hold ends)
    stage.after_produce           a stage produced a round's output; its offsets are not stored
                                  the input's offsets (the round comes again)
    approval.during_release       a decision released a call to execution inside its
                                  transaction, not yet committed (the decision comes again)
    relay.during_publish          the outbox relay published rows; marking them sent has not
                                  committed (they are published again)

SIGKILL, not an exception: nothing of the process's own cleanup runs, as in a power cut.
"""

from __future__ import annotations

import logging
import os
import random
import signal

log = logging.getLogger("toolgate.faults")

POINTS = frozenset(
    {
        "execution.after_http_effect",
        "execution.after_commit",
        "stage.after_produce",
        "approval.during_release",
        "relay.during_publish",
    }
)
ENV = "TOOLGATE_FAULTS"


def parse(text: str) -> dict[str, float]:
    """`point=chance,...` to {point: chance}; an unknown point or a chance outside [0, 1] is
    refused, so a typo in a chaos run never silently tests nothing."""
    chances: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        point, _, chance = part.partition("=")
        if point not in POINTS:
            raise ValueError(f"{ENV}: unknown crash point {point!r}; known: {', '.join(sorted(POINTS))}")
        value = float(chance or "1")
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{ENV}: chance of {point} must be within [0, 1], not {value}")
        chances[point] = value
    return chances


_CHANCES = parse(os.environ.get(ENV, ""))


def crash_point(point: str) -> None:
    """Die here with the configured chance (never, unless TOOLGATE_FAULTS names the point)."""
    chance = _CHANCES.get(point)
    if chance and random.random() < chance:
        log.warning("crash point %s: killing myself", point, extra={"action": "crash_point", "point": point})
        os.kill(os.getpid(), signal.SIGKILL)
