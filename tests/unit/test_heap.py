"""A ready worker's heap is frozen and its young generation collected less often (heap.py)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from toolgate.workers.runtime import heap


@pytest.fixture
def restored() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def test_settle_freezes_what_exists_and_raises_the_young_threshold(restored: None) -> None:
    held = [Node() for _ in range(10)]
    heap.settle()
    assert gc.get_threshold() == (heap.YOUNG, *heap.OLDER)
    assert gc.get_freeze_count() > len(held)
    assert not any(obj is held for obj in gc.get_objects())  # frozen: no generation scans it


def test_a_cycle_made_after_settle_is_collected_by_allocations_alone(restored: None) -> None:
    heap.settle()
    a, b = Node(), Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    del a, b
    assert gone() is not None  # a cycle: reference counting alone does not free it
    allocated = [[] for _ in range(heap.YOUNG + 100)]  # enough to start a young collection
    assert gone() is None
    del allocated
