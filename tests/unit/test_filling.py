"""How much a stage takes into a round, a poll and its buffer, and how long a round lingers to
fill (workers/runtime/filling.py)."""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass

import pytest

from toolgate.workers.runtime.filling import INTERNAL_POLL_RECORDS, LINGER_STEP_S, Filling, bounds_for


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


class _Clock:
    """A clock that moves only when the round sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def _linger(round_: Filling[_Record], arrivals: list[int], within_s: float = 0.020) -> _Clock:
    """Linger `round_` while `arrivals[i]` records arrive during its i-th look (none after)."""
    clock = _Clock()
    queue: deque[_Record] = deque()
    looks = iter(arrivals)

    def refill() -> None:
        queue.extend(_Record(b"x") for _ in range(next(looks, 0)))
        round_.take(queue)

    asyncio.run(round_.linger(refill, within_s, clock, clock.sleep))
    return clock


def test_a_round_with_nothing_behind_it_starts_at_once() -> None:
    round_ = Filling(_Record(b"x"), 500, 512 * 1024)
    assert _linger(round_, [5]).slept == []
    assert len(round_.records) == 1


def test_a_round_stops_lingering_at_the_first_look_that_brings_nothing() -> None:
    """Two records pending is load, but not a reason to wait out the whole window, as rounds
    did before (ten looks of 2 ms, whatever they found)."""
    round_ = Filling(_Record(b"x"), 500, 512 * 1024)
    round_.take(_queue(1))
    assert _linger(round_, [0, 1, 1]).slept == [LINGER_STEP_S]
    assert len(round_.records) == 2


def test_a_round_lingers_while_records_keep_arriving() -> None:
    round_ = Filling(_Record(b"x"), 500, 512 * 1024)
    round_.take(_queue(1))
    assert _linger(round_, [3, 2, 1, 0]).slept == [LINGER_STEP_S] * 4
    assert len(round_.records) == 8


def test_lingering_ends_with_its_window_or_a_full_round() -> None:
    steady = Filling(_Record(b"x"), 500, 512 * 1024)
    steady.take(_queue(1))
    clock = _linger(steady, [1] * 100, within_s=0.005)
    assert clock.slept == pytest.approx([LINGER_STEP_S, LINGER_STEP_S, 0.001])
    assert len(steady.records) == 5

    filling = Filling(_Record(b"x"), 4, 512 * 1024)
    filling.take(_queue(1))
    assert len(_linger(filling, [5]).slept) == 1
    assert len(filling.records) == 4 and filling.full
