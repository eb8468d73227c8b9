"""Which stages of `toolgate up` yield the machine's CPUs to the others.

On one machine the stages share its cores, and under load the kernel gives every busy process
its equal share. The stages that take calls in (validation, policy) then keep pace with those
that finish them (approval-wait, execution, normalization), and a backlog piles up inside the
pipeline, between stages: calls already checked wait behind calls still arriving, and when the
arrivals stop, the stages that finish calls work through that pile with the first stages idle
and a core to spare. With the first two stages at a lower priority (a positive nice), the
cores go first to the calls already taken in: a backlog waits before the pipeline, on the
proposals topic, and the calls in it finish sooner once they are taken.

Measured on this project's machine (2 cores; runs on a fresh `toolgate up`, the stages reniced
or not, alternating): at full speed (100,000 calls) 2,237-2,390 calls/s in 4 runs against
2,091-2,280 in 5 (3 pairs in a row: 2,265 against 2,091, 2,316 against 2,255, 2,390 against
2,147), the machine busy 95.4-98.0% of the run against 89.6-95.4; at 300 calls/s p99 114 and 131
ms against 164 and 219; at 1,000 calls/s 169 and 188 against 162 and 219 (docs/performance.md,
"The seventeenth session"). Nice 10 measured as nice 5 (2,319 and 2,265 calls/s).

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
