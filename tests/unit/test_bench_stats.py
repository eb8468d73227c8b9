"""The bench's figures: percentiles and the hop table, from times handed in."""

from __future__ import annotations

import pytest

from toolgate.ops.bench.stats import hop_table, latency_summary, percentile, render_hops


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([], 50, 0.0),
        ([7.0], 99, 7.0),
        ([1.0, 2.0, 3.0], 50, 2.0),
        ([float(v) for v in range(1, 101)], 99, 99.0),
        ([float(v) for v in range(1, 101)], 100, 100.0),
        ([float(v) for v in range(1, 101)], 0, 1.0),
    ],
)
def test_percentile_is_nearest_rank(values: list[float], q: float, expected: float) -> None:
    assert percentile(values, q) == expected


def test_latency_summary_sorts_and_rounds() -> None:
    figures = latency_summary([30.04, 10.0, 20.0])
    assert figures == {"p50_ms": 20.0, "p90_ms": 30.0, "p95_ms": 30.0, "p99_ms": 30.0, "max_ms": 30.0}
    assert latency_summary([]) == {"p50_ms": 0.0, "p90_ms": 0.0, "p95_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0}


def test_hop_table_measures_each_step_from_the_point_before() -> None:
    paths = {
        "a": {"published": 1000.0, "proposals": 1002.0, "validated": 1030.0, "observation": 1100.0, "received": 1150.0},
        "b": {"published": 2000.0, "proposals": 2004.0, "validated": 2050.0, "observation": 2200.0, "received": 2210.0},
    }
    table = hop_table(paths)
    assert list(table) == ["proposals", "validated", "observation", "received"]
    assert table["validated"] == {
        "calls": 2,
        "since_publish": {"p50_ms": 30.0, "p99_ms": 50.0},
        "step": {"p50_ms": 28.0, "p99_ms": 46.0},
    }
    # b reached received 10 ms after its observation, a 50 ms after
    assert table["received"]["step"] == {"p50_ms": 10.0, "p99_ms": 50.0}
    assert table["received"]["since_publish"] == {"p50_ms": 150.0, "p99_ms": 210.0}


def test_a_call_that_skips_a_point_steps_from_the_last_point_it_reached() -> None:
    refused = {"published": 0.0, "validated": 20.0, "results": 25.0, "observation": 40.0}
    executed = {"published": 0.0, "validated": 20.0, "authorized": 30.0, "executable": 40.0, "results": 60.0}
    table = hop_table({"r": refused, "x": executed})
    assert table["authorized"]["calls"] == 1
    assert table["results"]["calls"] == 2
    assert sorted([table["results"]["step"]["p50_ms"], table["results"]["step"]["p99_ms"]]) == [5.0, 20.0]


def test_calls_without_a_publish_time_are_left_out() -> None:
    assert hop_table({"stray": {"validated": 5.0}}) == {}


def test_render_hops_prints_a_line_per_point() -> None:
    lines = render_hops(hop_table({"a": {"published": 0.0, "validated": 12.5, "received": 40.0}}))
    assert lines[0].split() == ["point", "calls", "step", "p50", "step", "p99", "total", "p50", "total", "p99"]
    assert lines[1].split() == ["validated", "1", "12.5", "12.5", "12.5", "12.5"]
    assert lines[2].split() == ["received", "1", "27.5", "27.5", "40.0", "40.0"]
