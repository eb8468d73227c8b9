"""When a timer's job runs again (StageApp.every): after the timer's interval, unless the job
said when (`after`: a sweep with nothing due soon sleeps until it is), and at once when rung
(`ring`: a handler made something the job will have to look at)."""

from __future__ import annotations

import asyncio
import contextlib


class Alarm:
    def __init__(self) -> None:
        self._rung = asyncio.Event()
        self._after: float | None = None

    def after(self, seconds: float) -> None:
        """The job's next run comes `seconds` after this one (said by the job as it runs)."""
        self._after = seconds

    def ring(self) -> None:
        """Run the job now, from the event loop's thread (a sleep in progress ends)."""
        self._rung.set()

    async def sleep(self, interval_s: float) -> None:
        """Until the next run: what the job said, else `interval_s`, or until rung."""
        seconds, self._after = (interval_s if self._after is None else self._after), None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._rung.wait(), max(0.0, seconds))
        self._rung.clear()
