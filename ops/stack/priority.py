"""Which stages of `toolgate up` yield the machine's CPUs to the others.

On one machine the stages share its cores, and under load the kernel gives every busy process
its equal share. The stages that take calls in (validation, policy) then keep pace with those
that finish them (approval-wait, execution, normalization), and a backlog piles up inside the
pipeline, between stages: calls already checked wait behind calls still arriving, and when the
arrivals stop, the stages that finish calls work through that pile with the first stages idle
and a core to spare. With the first two stages at a lower priority (a positive nice), the
cores go first to the calls already taken in: a backlog waits before the pipeline, on the
proposals topic, and the calls in it finish sooner once they are taken.

On this project's machine (2 cores; each run on a fresh `toolgate up`; every run in
docs/performance.md, "The seventeenth session", the figures in "Figures behind the code"): at the
end of a full-speed run the last stages worked alone for less time; at full speed nice +5 ran
more calls a second in most pairs, the machine busier through the run; p99 was lower at 300
calls/s and at 1,000. Nice +10 did no better than +5.

Only `toolgate up` sets it, for the stage processes it starts on one machine: where stages run
in containers or on machines of their own, the scheduler does not share a core among them.
"""

from __future__ import annotations

import os

# The stages that take calls into the pipeline, before the first effect is reserved.
UPSTREAM = frozenset({"validation", "policy"})


def niceness(stage: str, upstream_nice: int) -> int:
    """How much lower than `toolgate up` itself the stage `stage` runs (a nice increment)."""
    return max(0, upstream_nice) if stage in UPSTREAM else 0


def lower_priority(increment: int) -> None:
    """In a child about to run a stage: lower its priority by `increment` (0: as it is)."""
    if increment:
        os.nice(increment)
