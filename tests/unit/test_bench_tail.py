"""Where a run's slowest calls came from (ops/bench/tail.py)."""

from __future__ import annotations

from toolgate.ops.bench.tail import TOP, Timeline, render, slowest

START = 1_000.0  # monotonic seconds


def steady(seconds: int, per_second: int = 10) -> list[tuple[float, float]]:
    """Calls published evenly over `seconds`, answered in 40-49 ms."""
    return [(START + s + i / per_second, 40.0 + (s + i) % 10) for s in range(seconds) for i in range(per_second)]


def test_a_stall_puts_the_slowest_calls_in_one_second() -> None:
    calls = steady(100)  # 1,000 calls at 50 ms
    stalled = [(START + 42 + i / 20, 400.0 - i) for i in range(20)]  # 20 calls of second 42 held
    tail = slowest(calls + stalled, START)
    assert tail["p99_ms"] == 390.0
    assert tail["seconds"] == 1
    (worst,) = tail["worst"]
    assert worst == {"second": 42, "calls": tail["calls"], "max_ms": 400.0}


def test_a_tail_spread_over_the_run_names_the_seconds_holding_most() -> None:
    calls = steady(100)
    slow = [(START + s + 0.5, 300.0) for s in range(0, 100, 10)]  # one slow call every 10 s
    slow += [(START + 70.2, 310.0), (START + 30.7, 305.0)]  # seconds 70 and 30 hold two
    # The slowest 10 of 1,012: the two of 305 and 310 ms and eight of the ten of 300 (of a tie,
    # the later published), over seconds 20 to 90.
    tail = slowest(calls + slow, START)
    assert tail["calls"] == 10 and tail["seconds"] == 8
    assert len(tail["worst"]) == TOP
    assert [w["second"] for w in tail["worst"]] == [30, 70, 20]  # most first, then the earlier


def test_the_timeline_says_what_the_disk_and_the_machine_did_while_they_were_in_flight() -> None:
    calls = steady(100)
    stalled = [(START + 42 + i / 20, 600.0 - i * 10) for i in range(12)]  # 42.0-42.55, the last 490 ms
    timeline = Timeline(
        disk=[(START + 10.25, 80.0), (START + 42.5, 45.7), (START + 42.75, 0.1), (START + 60.0, 90.0)],
        speed=[(START + 41.5, 9.2), (START + 42.6, 15.4), (START + 50.0, 30.0)],
    )
    (worst,) = slowest(calls + stalled, START, timeline)["worst"]
    # In flight from 42.0 to 43.1: the disk's quarters ending at 42.5 and 42.75 (not the stalls
    # at 10 and 60), and the samples within a second of it (not the one at 50).
    assert worst["second"] == 42
    assert worst["disk_worst_ms_per_write"] == 45.7
    assert worst["probe_slowest_ms"] == 15.4


def test_without_samples_near_them_the_probe_says_nothing() -> None:
    calls = steady(100) + [(START + 42 + i / 20, 600.0) for i in range(12)]
    (worst,) = slowest(calls, START, Timeline(speed=[(START + 90.0, 9.0)]))["worst"]
    assert worst["probe_slowest_ms"] is None and "disk_worst_ms_per_write" not in worst


def test_no_answered_call_no_tail() -> None:
    assert slowest([], START) == {"calls": 0}
    assert render({"calls": 0}) == []


def test_the_tail_reads_as_text() -> None:
    calls = steady(100) + [(START + 42 + i / 20, 600.0 - i * 10) for i in range(12)]
    timeline = Timeline(disk=[(START + 42.5, 45.7)], speed=[(START + 42.6, 15.4)])
    lines = render(slowest(calls, START, timeline))
    assert lines == [
        "slowest 1%: 10 calls (p99 500.0 ms), published in 1 s of the run",
        "  second 42: 10 of them, up to 600.0 ms; disk up to 45.7 ms a write; probe up to 15.4 ms",
    ]
