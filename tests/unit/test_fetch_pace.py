"""The fetch wait follows the traffic: short from the first record on, long once idle."""

from __future__ import annotations

import asyncio
import inspect

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.consumer.fetcher import Fetcher

from toolgate.workers.runtime.fetch_pace import FetchPace


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Consumer:
    """What the pace writes to: an aiokafka consumer's attribute and its fetcher's."""

    def __init__(self) -> None:
        self._fetch_max_wait_ms = 500
        self._fetcher = type("F", (), {"_fetch_max_wait_ms": 500})()


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        ([], 25),  # nothing has flowed yet: the idle wait
        (["flowing"], 2),
        (["flowing", ("advance", 1.0), "quiet"], 2),  # a record within idle_after: still busy
        (["flowing", ("advance", 2.0), "quiet"], 25),
        (["flowing", ("advance", 5.0), "quiet", "flowing"], 2),
    ],
)
def test_wait_follows_traffic(steps: list[object], expected: int) -> None:
    clock = Clock()
    pace = FetchPace(busy_ms=2, idle_ms=25, idle_after_s=2.0, clock=clock)
    consumer = Consumer()
    pace.attach(consumer)
    for step in steps:
        if isinstance(step, tuple):
            clock.now += float(step[1])  # type: ignore[arg-type]
        else:
            getattr(pace, str(step))()
    assert pace.wait_ms == expected
    assert consumer._fetch_max_wait_ms == expected
    assert consumer._fetcher._fetch_max_wait_ms == expected


def test_idle_wait_is_never_shorter_than_busy() -> None:
    assert FetchPace(busy_ms=30, idle_ms=25, idle_after_s=1.0).idle_ms == 30


def test_next_goes_quiet_while_nothing_comes_and_flows_again() -> None:
    async def scenario() -> tuple[int, int, str]:
        pace = FetchPace(busy_ms=2, idle_ms=25, idle_after_s=0.01)
        queue: asyncio.Queue[str] = asyncio.Queue()
        queue.put_nowait("first")
        assert await pace.next(queue) == "first"
        busy = pace.wait_ms
        waiter = asyncio.ensure_future(pace.next(queue))
        await asyncio.sleep(0.05)
        idle = pace.wait_ms
        queue.put_nowait("second")
        return busy, idle, await waiter

    busy, idle, second = asyncio.run(scenario())
    assert (busy, idle, second) == (2, 25, "second")


def test_a_real_consumer_and_its_fetcher_read_the_attribute_the_pace_writes() -> None:
    """aiokafka has no setting for a running consumer's wait: guard the attribute it reads."""
    assert "self._fetch_max_wait_ms = fetch_max_wait_ms" in inspect.getsource(Fetcher.__init__)
    assert "self._fetch_max_wait_ms," in inspect.getsource(Fetcher._get_actions_per_node)
    assert "fetch_max_wait_ms=self._fetch_max_wait_ms" in inspect.getsource(AIOKafkaConsumer.start)
