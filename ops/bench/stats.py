"""What `toolgate bench` computes from what it measured: latency percentiles and the hop table.

No I/O and no clock: the bench (`ops/bench/run.py`) and the topic reader (`ops/bench/hops.py`) hand
in times, in milliseconds on the wall clock, and get figures back.

A call's path is a list of points, each the time its call reached it:

    published    the bench called `propose` (the client's clock)
    proposals    the proposal record was produced (its Kafka timestamp)
    validated    the StageBatch carrying it on tool.validated was produced
    authorized   ... on tool.authorized
    executable   ... on tool.executable
    results      ... on tool.results
    observation  its final observation was produced on the tenant's topic
    received     the client had it in hand (the client's clock)

The hop table gives, per point, how long after `published` a call reached it and how long the
step from the point before took (p50/p99). A call that skipped a point (a refused call goes from
validated straight to results) counts only in the steps it took; its step is measured from the
last point it did reach.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

POINTS = ("published", "proposals", "validated", "authorized", "executable", "results", "observation", "received")
INTERNAL_POINTS = ("validated", "authorized", "executable", "results")


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The nearest-rank q-th percentile of already sorted values (0.0 for none)."""
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, max(0, round(q / 100 * (len(sorted_values) - 1))))
    return sorted_values[index]


def latency_summary(values_ms: Iterable[float]) -> dict[str, float]:
    """p50, p90, p95, p99 and max of latencies in milliseconds, rounded to 0.1 ms."""
    ordered = sorted(values_ms)
    figures = {f"p{q}_ms": round(percentile(ordered, q), 1) for q in (50, 90, 95, 99)}
    figures["max_ms"] = round(ordered[-1], 1) if ordered else 0.0
    return figures


def _quantiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"p50_ms": round(percentile(ordered, 50), 1), "p99_ms": round(percentile(ordered, 99), 1)}


def hop_table(paths: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, Any]]:
    """Per point of POINTS after `published`: how many calls reached it, p50/p99 of the time
    since `published` (`since_publish`) and of the step from the call's previous point (`step`).
    `paths` maps each call to the points it reached (ms); a call without `published` is left out."""
    since: dict[str, list[float]] = {p: [] for p in POINTS[1:]}
    steps: dict[str, list[float]] = {p: [] for p in POINTS[1:]}
    for path in paths.values():
        if "published" not in path:
            continue
        previous = path["published"]
        for point in POINTS[1:]:
            if point not in path:
                continue
            since[point].append(path[point] - path["published"])
            steps[point].append(path[point] - previous)
            previous = path[point]
    return {
        point: {"calls": len(since[point]), "since_publish": _quantiles(since[point]), "step": _quantiles(steps[point])}
        for point in POINTS[1:]
        if since[point]
    }


def render_hops(table: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The hop table as aligned text lines, for a person."""
    lines = [f"{'point':<12} {'calls':>6} {'step p50':>9} {'step p99':>9} {'total p50':>10} {'total p99':>10}"]
    for point, row in table.items():
        step, total = row["step"], row["since_publish"]
        lines.append(
            f"{point:<12} {row['calls']:>6} {step['p50_ms']:>9.1f} {step['p99_ms']:>9.1f}"
            f" {total['p50_ms']:>10.1f} {total['p99_ms']:>10.1f}"
        )
    return lines
