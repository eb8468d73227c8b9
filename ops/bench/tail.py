"""Where a run's slowest calls came from: the seconds they were published in, and what the disk
and the machine's speed did while they were in flight.

A run's p99 is set by its slowest hundredth of calls. Those can be spread over the whole run
(the stages falling behind under load) or bunched into a second or two (something stopped
everything for a moment: on this project's machine, a disk whose writes stall for a few hundred
milliseconds, which every stage's commit waits for, or a host that slows this virtual machine).
The two call for different answers, and the percentiles alone cannot tell them apart. So the
report groups the slowest hundredth of calls (at least one) by the second of the run in which
they were published
and names the seconds that hold most of them; with `--cpu`, each named second also says the
slowest quarter second of the disk (ms a write, `disk.py`) and the slowest sample of the
machine's speed (`speed.py`) while its slow calls were in flight.

No I/O and no clock: times come in as seconds on the monotonic clock, which the benchmark's
threads and its probe process share.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from toolgate.ops.bench.disk import WINDOW_S
from toolgate.ops.bench.stats import percentile

TOP = 3  # seconds named
NEAR_S = 1.0  # a speed sample this close to a second's calls in flight counts for them


@dataclass(frozen=True)
class Timeline:
    """What the machine did during a run: the disk's quarter seconds that wrote (when each
    ended, its ms a write) and the speed probe's samples (when, its ms), monotonic seconds."""

    disk: Sequence[tuple[float, float]] = ()
    speed: Sequence[tuple[float, float]] = ()


def slowest(calls: Sequence[tuple[float, float]], started: float, timeline: Timeline | None = None) -> dict[str, Any]:
    """`calls`: when each answered call was published and its latency in ms; `started`: when
    the run began. The slowest hundredth of the calls (at least one; ties at its edge broken by
    publishing order): how many, over how many seconds of the run, and the TOP seconds holding
    most of them (the earlier second first on a tie), beside the run's p99."""
    if not calls:
        return {"calls": 0}
    ordered = sorted(calls, key=lambda call: call[1])
    slow = ordered[-max(1, len(ordered) // 100) :]
    by_second: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for at, ms in slow:
        by_second[int(at - started)].append((at, ms))
    ranked = sorted(by_second.items(), key=lambda item: (-len(item[1]), item[0]))[:TOP]
    return {
        "p99_ms": round(percentile([ms for _, ms in ordered], 99), 1),
        "calls": len(slow),
        "seconds": len(by_second),
        "worst": [_second(second, members, started, timeline) for second, members in ranked],
    }


def _second(
    second: int, members: list[tuple[float, float]], started: float, timeline: Timeline | None
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "second": second,
        "calls": len(members),
        "max_ms": round(max(ms for _, ms in members), 1),
    }
    if timeline is None:
        return entry
    # In flight: from the second's start until its last slow call was answered.
    begin = started + second
    end = max(at + ms / 1000 for at, ms in members)
    if timeline.disk:
        overlapping = [ms for ended, ms in timeline.disk if ended >= begin and ended - WINDOW_S <= end]
        entry["disk_worst_ms_per_write"] = round(max(overlapping, default=0.0), 1)
    if timeline.speed:
        near = [ms for at, ms in timeline.speed if begin - NEAR_S <= at <= end + NEAR_S]
        entry["probe_slowest_ms"] = round(max(near), 2) if near else None
    return entry


def render(tail: dict[str, Any]) -> list[str]:
    """The tail as lines of text, under the hop table."""
    if not tail.get("calls"):
        return []
    seconds = f"published in {tail['seconds']} s of the run"
    lines = [f"slowest 1%: {tail['calls']} calls (p99 {tail['p99_ms']} ms), {seconds}"]
    for second in tail["worst"]:
        text = f"  second {second['second']}: {second['calls']} of them, up to {second['max_ms']} ms"
        if "disk_worst_ms_per_write" in second:
            text += f"; disk up to {second['disk_worst_ms_per_write']} ms a write"
        if second.get("probe_slowest_ms") is not None:
            text += f"; probe up to {second['probe_slowest_ms']} ms"
        lines.append(text)
    return lines
