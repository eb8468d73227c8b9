"""When approval-wait's expiry sweep runs next (workers/approval/sweep.py, `next_sweep_s`), and
the alarm a timer sleeps on (workers/runtime/alarm.py)."""

from __future__ import annotations

import asyncio
import time

from toolgate.workers.approval.sweep import IDLE_SWEEP_S, next_sweep_s
from toolgate.workers.runtime.alarm import Alarm


def test_with_no_ticket_waiting_the_sweep_sleeps_the_idle_pace() -> None:
    assert next_sweep_s(None, 1.0) == IDLE_SWEEP_S
    assert next_sweep_s(None, 30.0) == 30.0  # a slower sweep interval stays the deployment's


def test_a_ticket_due_within_the_interval_or_past_keeps_the_interval() -> None:
    assert next_sweep_s(0.3, 1.0) == 1.0
    assert next_sweep_s(-4.0, 1.0) == 1.0  # due now: swept now, and again an interval later


def test_a_ticket_due_later_is_slept_until_at_most_the_idle_pace() -> None:
    assert next_sweep_s(2.5, 1.0) == 2.5
    assert next_sweep_s(600.0, 1.0) == IDLE_SWEEP_S


def test_an_alarm_sleeps_what_the_job_said_once_then_the_interval() -> None:
    async def slept(alarm: Alarm, interval_s: float) -> float:
        started = time.monotonic()
        await alarm.sleep(interval_s)
        return time.monotonic() - started

    async def run() -> tuple[float, float]:
        alarm = Alarm()
        alarm.after(0.05)
        return await slept(alarm, 0.3), await slept(alarm, 0.01)

    said, interval = asyncio.run(run())
    assert 0.04 <= said < 0.25 and interval < 0.25, (said, interval)


def test_a_rung_alarm_ends_the_sleep_at_once_and_only_that_one() -> None:
    async def run() -> tuple[float, float]:
        alarm = Alarm()
        alarm.after(5.0)
        loop = asyncio.get_running_loop()
        loop.call_later(0.05, alarm.ring)
        started = time.monotonic()
        await alarm.sleep(5.0)
        rung = time.monotonic() - started
        started = time.monotonic()
        await alarm.sleep(0.1)  # the ring was spent: this sleep is the interval's
        return rung, time.monotonic() - started

    rung, after = asyncio.run(run())
    assert rung < 1.0 and 0.09 <= after < 1.0, (rung, after)
