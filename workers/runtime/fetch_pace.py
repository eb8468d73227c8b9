"""The fetch wait a stage's consumer asks the broker for: short while records flow, long once idle.

Tansu does not answer a waiting fetch as soon as records arrive, so every hop waits for part of
the fetch wait (measured on Tansu 0.6 with aiokafka: p50 1.7 ms at a 1 ms wait, 4.8 ms at 25 ms,
26.5 ms at 100 ms). A short wait keeps hops short, but costs a fetch request every few
milliseconds; an idle deployment should not pay that. So the wait follows the traffic: `busy_ms`
from the first record on, `idle_ms` once no record has come for `idle_after_s`. The first
record after an idle spell waits up to `idle_ms`; the ones behind it do not.

aiokafka reads its fetcher's `_fetch_max_wait_ms` for every fetch request it builds, and
offers no setting to change it on a running consumer; `attach` is handed the consumer (from the
consumer thread, workers/runtime/transport.py) and the pace writes that attribute.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class FetchPace:
    def __init__(
        self, busy_ms: int, idle_ms: int, idle_after_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.busy_ms = busy_ms
        self.idle_ms = max(idle_ms, busy_ms)
        self.idle_after_s = idle_after_s
        self.clock = clock
        self.wait_ms = self.idle_ms  # nothing has flowed yet
        self._last_record = -float("inf")
        self._consumer: Any = None

    def attach(self, consumer: Any) -> None:
        """The aiokafka consumer whose fetches this pace sets (before or after it started)."""
        self._consumer = consumer
        self._apply()

    def flowing(self) -> None:
        """A record has come: fetch with the short wait."""
        self._last_record = self.clock()
        if self.wait_ms != self.busy_ms:
            self.wait_ms = self.busy_ms
            self._apply()

    def quiet(self) -> None:
        """No record for a while, by one reader's account: the long wait, unless any record came
        within `idle_after_s` (a stage may read several topics through one consumer)."""
        if self.wait_ms != self.idle_ms and self.clock() - self._last_record >= self.idle_after_s:
            self.wait_ms = self.idle_ms
            self._apply()

    async def next(self, queue: asyncio.Queue[T]) -> T:
        """The next record of `queue`, going quiet while none comes."""
        try:
            item = queue.get_nowait()
        except asyncio.QueueEmpty:
            while True:
                try:
                    item = await asyncio.wait_for(queue.get(), self.idle_after_s)
                    break
                except TimeoutError:
                    self.quiet()
        self.flowing()
        return item

    def _apply(self) -> None:
        consumer = self._consumer
        if consumer is None:
            return
        consumer._fetch_max_wait_ms = self.wait_ms  # what a fetcher built at start() reads
        fetcher = getattr(consumer, "_fetcher", None)
        if fetcher is not None:
            fetcher._fetch_max_wait_ms = self.wait_ms
