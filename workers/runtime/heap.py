"""Python's cyclic garbage collector in a long-running stage.

A worker that has started holds a heap that lives as long as it does: modules, pydantic's
schemas, the contracts and their compiled validators, OpenTelemetry's providers. With the
collector's defaults (a collection of the young generation every 700 net allocations of
container objects, and of each older generation every tenth of the one below) every round pays
for scanning survivors again and again, and a full collection walks that whole heap.

Once the stage is ready, `settle` collects, freezes what exists (`gc.freeze`: those objects are
never scanned again; they were never going to be garbage) and lets the young generation grow to
50,000 objects before it is collected. Cycles are still found, in fewer and larger collections.
A round's objects mostly die by reference counting, which the collector does not see.

At full speed, in alternating runs with and without it, the stages' CPU per call fell and the
pipeline ran more calls a second (docs/performance.md, "Figures behind the code").
"""

from __future__ import annotations

import gc

YOUNG = 50_000  # allocations of container objects between two collections of the young generation
OLDER = (20, 100)  # collections of the generation below between two of the next


def settle() -> None:
    """Freeze what a ready worker holds, and collect the young generation less often."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG, *OLDER)
