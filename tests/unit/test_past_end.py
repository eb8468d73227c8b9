"""When a reader counts a partition as read past its end (topics/ends.py `PastEnd`): only once
the ends its fetch answers tell stayed short of where it reads for PAST_END_S, since a new leader
of an Apache Kafka partition may tell a short end for a moment."""

from __future__ import annotations

import time
from typing import Any

import pytest

from toolgate.topics import ends
from toolgate.topics.ends import PastEnd

KEY = ("tool.observations.acme", 0)


class _Consumer:
    """librdkafka's cached watermarks: the end the last fetch answer told (none yet: -1001)."""

    def __init__(self) -> None:
        self.end = -1001

    def get_watermark_offsets(self, partition: Any, cached: bool = False) -> tuple[int, int]:
        assert cached
        return 0, self.end


@pytest.fixture(autouse=True)
def _short_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ends, "PAST_END_S", 0.05)


def test_nothing_is_past_an_end_no_fetch_answer_told() -> None:
    consumer = _Consumer()
    past = PastEnd(consumer)  # type: ignore[arg-type]
    time.sleep(0.06)
    assert not past.lost(KEY, 1_000)


def test_a_partition_read_past_its_end_is_lost_once_it_stayed_so() -> None:
    consumer = _Consumer()
    consumer.end = 5
    past = PastEnd(consumer)  # type: ignore[arg-type]
    assert not past.lost(KEY, 7)  # first seen so
    time.sleep(0.06)
    assert past.lost(KEY, 7)
    assert not past.lost(KEY, 5) and not past.lost(KEY, ends.OFFSET_BEGINNING)  # at its end; from its start


def test_an_end_short_for_a_moment_only_starts_over_when_it_comes_back() -> None:
    # A new leader told a short end, then caught up; later another told one again.
    consumer = _Consumer()
    consumer.end = 5
    past = PastEnd(consumer)  # type: ignore[arg-type]
    assert not past.lost(KEY, 7)
    consumer.end = 9
    time.sleep(0.06)
    assert not past.lost(KEY, 7)
    consumer.end = 5
    assert not past.lost(KEY, 7)  # short again, but only just
