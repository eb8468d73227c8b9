"""The client's observation feed: what it keeps for whom, and where it reads on from when a call
waits again. A scripted stand-in for the consumer (assign, unassign, poll, close) drives it."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING

from toolgate.client import feed as observer
from toolgate.client.feed import ObservationFeed
from toolgate.topics import ends
from toolgate.topics.consumed import Consumed
from toolgate.topics.headers import CALL_ID


class _Msg:
    """A fetched record as the feed reads it, through topics/consumed.py: every part of it."""

    def __init__(self, call_id: str, partition: int, offset: int) -> None:
        self._headers = [(CALL_ID, call_id.encode())]
        self._partition, self._offset = partition, offset

    def headers(self) -> list[tuple[str, bytes]]:
        return self._headers

    def topic(self) -> str:
        return "tool.observations.acme"

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes:
        return b"run"

    def value(self) -> bytes:
        return b""

    def timestamp(self) -> tuple[int, int]:
        return (1, 0)

    def error(self) -> None:
        return None


class _Consumer:
    """Hands out queued records while assigned; remembers every assignment."""

    def __init__(self) -> None:
        self.queued: list[_Msg] = []
        self.assignments: list[list[tuple[int, int]]] = []
        self.assigned = False
        self.ends: dict[int, int] = {}
        self.lock = threading.Lock()

    def assign(self, partitions: list[Any]) -> None:
        self.assignments.append([(tp.partition, tp.offset) for tp in partitions])
        self.assigned = True

    def unassign(self) -> None:
        self.assigned = False

    def poll(self, timeout: float) -> _Msg | None:
        with self.lock:
            if self.assigned and self.queued:
                return self.queued.pop(0)
        time.sleep(0.001)
        return None

    def get_watermark_offsets(self, partition: Any, cached: bool = False) -> tuple[int, int]:
        """The end of `partition` as the last fetch answer told it (none yet: -1001)."""
        assert cached, "the feed asks no broker from its thread"
        return 0, self.ends.get(partition.partition, -1001)

    def close(self) -> None:
        self.assigned = False


def _feed(consumer: _Consumer, also: set[str] | None = None) -> tuple[ObservationFeed[str], list[str]]:
    read: list[str] = []

    def _read(record: Consumed) -> str:
        read.append(f"{record.partition}:{record.offset}")
        return f"{record.partition}:{record.offset}"

    feed: ObservationFeed[str] = ObservationFeed(
        consumer,  # type: ignore[arg-type]
        "tool.observations.acme",
        {0: 5, 1: 7},
        _read,
        also_read=lambda call_id: call_id in (also or set()),
    )
    return feed, read


def test_a_watched_call_gets_what_is_heard_of_it_and_others_are_not_kept() -> None:
    consumer = _Consumer()
    feed, read = _feed(consumer, also={"other"})
    feed.watch("c1")
    consumer.queued += [_Msg("stranger", 0, 5), _Msg("other", 0, 6), _Msg("c1", 1, 7)]
    assert feed.take("c1", lambda item: True, timeout=2.0) == "1:7"
    assert read == ["0:6", "1:7"]  # the stranger's record was never read; `also_read` ones are
    assert feed.take("c1", lambda item: True, timeout=0.0) == "1:7"  # still there until forgotten
    feed.forget("c1")
    assert not feed.watches("c1")
    assert feed.take("c1", lambda item: True, timeout=0.0) is None
    feed.close()


def test_take_waits_for_what_is_wanted_and_gives_up_at_its_timeout() -> None:
    consumer = _Consumer()
    feed, _ = _feed(consumer)
    feed.watch("c1")
    consumer.queued.append(_Msg("c1", 0, 5))
    assert feed.take("c1", lambda item: item == "0:6", timeout=0.2) is None
    consumer.queued.append(_Msg("c1", 0, 6))
    assert feed.take("c1", lambda item: item == "0:6", timeout=2.0) == "0:6"
    feed.close()


def test_with_no_one_waiting_it_gives_up_its_partitions_and_reads_on_from_where_it_was() -> None:
    consumer = _Consumer()
    feed, _ = _feed(consumer)
    feed.watch("c1")
    consumer.queued.append(_Msg("c1", 0, 5))
    assert feed.take("c1", lambda item: True, timeout=2.0) == "0:5"
    deadline = time.monotonic() + 2
    while consumer.assigned and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not consumer.assigned
    feed.watch("c2")
    consumer.queued.append(_Msg("c2", 1, 7))
    assert feed.take("c2", lambda item: True, timeout=2.0) == "1:7"
    assert consumer.assignments[0] == [(0, 5), (1, 7)]  # where the topic ended when the feed opened
    assert consumer.assignments[-1] == [(0, 6), (1, 7)]  # on from the record after the last one read
    feed.close()


def test_a_partition_read_past_the_end_a_fetch_told_is_read_again_from_its_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Its log started over (the embedded broker came back empty): the end a fetch answer tells is
    # short of where the feed reads (tests/integration/test_observation_feed.py, on the broker).
    monkeypatch.setattr(ends, "PAST_END_S", 0.1)
    consumer = _Consumer()
    feed, _ = _feed(consumer)
    feed.watch("c1")
    consumer.ends = {0: 5, 1: 2}  # partition 0 is read at its end; partition 1 past it
    rewound = [(0, 5), (1, OFFSET_BEGINNING)]
    deadline = time.monotonic() + 5
    while consumer.assignments[-1] != rewound and time.monotonic() < deadline:
        feed.take("c1", lambda item: True, timeout=0.05)  # someone waits: the feed reads
    assert consumer.assignments[-1] == rewound
    consumer.queued.append(_Msg("c1", 1, 0))
    assert feed.take("c1", lambda item: True, timeout=2.0) == "1:0"
    assert feed.positions == {0: 5, 1: 1}
    feed.close()


def test_it_forgets_the_oldest_calls_past_its_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(observer, "MAX_WATCHED", 2)
    feed, _ = _feed(_Consumer())
    for call_id in ("a", "b", "c"):
        feed.watch(call_id)
    assert [feed.watches(c) for c in ("a", "b", "c")] == [False, True, True]
    feed.close()


def test_a_record_it_cannot_read_is_passed_over_and_the_feed_reads_on() -> None:
    consumer = _Consumer()

    def _read(record: Consumed) -> str:
        if record.offset == 5:
            raise ValueError("not an observation")
        return f"{record.partition}:{record.offset}"

    feed: ObservationFeed[str] = ObservationFeed(consumer, "tool.observations.acme", {0: 5}, _read)  # type: ignore[arg-type]
    feed.watch("c1")
    consumer.queued += [_Msg("c1", 0, 5), _Msg("c1", 0, 6)]
    assert feed.take("c1", lambda item: True, timeout=2.0) == "0:6"
    feed.close()
