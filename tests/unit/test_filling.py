"""How much a stage takes into a round, a poll and its buffer (workers/runtime/filling.py)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import pytest

from toolgate.workers.runtime.filling import INTERNAL_POLL_RECORDS, Filling, bounds_for


@dataclass
class _Record:
    value: bytes | None


def _queue(*sizes: int) -> deque[_Record]:
    return deque(_Record(b"x" * size) for size in sizes)


@pytest.mark.parametrize(
    ("first", "queued", "batch_max", "batch_bytes", "taken", "left"),
    [
        # one call per record: the record count bounds the round
        (100, [100] * 10, 4, 1_000_000, 4, 7),
        # StageBatches: the bytes bound it, though far fewer records than batch_max
        (300_000, [300_000] * 5, 500, 512 * 1024, 2, 4),
        # a first record larger than the byte bound is a round of its own
        (900_000, [10] * 3, 500, 512 * 1024, 1, 3),
        # nothing queued: the round is the one record
        (10, [], 500, 512 * 1024, 1, 0),
        # a record without a value counts as empty
        (0, [0, 0], 2, 10, 2, 1),
    ],
)
def test_a_round_is_bounded_in_records_and_in_bytes(
    first: int, queued: list[int], batch_max: int, batch_bytes: int, taken: int, left: int
) -> None:
    queue = _queue(*queued)
    round_ = Filling(_Record(b"x" * first if first else None), batch_max, batch_bytes)
    round_.take(queue)
    assert (len(round_.records), len(queue)) == (taken, left)


def test_a_full_round_takes_nothing_more() -> None:
    queue = _queue(600_000)
    round_ = Filling(_Record(b"x" * 600_000), 500, 512 * 1024)
    assert round_.full
    round_.take(queue)
    assert (len(round_.records), len(queue)) == (1, 1)


def test_polls_of_stage_batches_are_a_few_records_and_polls_of_calls_a_round() -> None:
    internal = bounds_for(True, batch_max=500, stream_buffer=4096)
    edge = bounds_for(False, batch_max=500, stream_buffer=4096)
    assert internal.poll_records == INTERNAL_POLL_RECORDS < edge.poll_records == 500
    assert internal.buffer_records < edge.buffer_records == 4096
    assert bounds_for(False, batch_max=8000, stream_buffer=16).buffer_records == 8000
