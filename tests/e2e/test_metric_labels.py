"""Metric labels come from the registry, not from what a caller writes: through the running
`toolgate up`, calls naming tools no contract has are counted, and add no series of their own to
normalization's /metrics (workers/runtime/call_metrics.py)."""

from __future__ import annotations

import urllib.request
import uuid

from ..conftest import Pipeline, eventually
from .test_pipeline import taxonomy


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        return str(response.read().decode())


def _unknown_count(text: str) -> float:
    """tool_invocation_count_total summed over its series labelled tool="unknown"."""
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("tool_invocation_count_total{") and 'tool="unknown"' in line
    )


def test_tools_no_contract_has_add_no_series_of_their_own(pipeline: Pipeline) -> None:
    port = int(pipeline.refresh_runtime()["metrics"]["normalization"])
    before = _unknown_count(_scrape(port))
    names = [f"made.up_{uuid.uuid4().hex[:10]}" for _ in range(4)]
    for name in names:
        assert taxonomy(pipeline.call(name, {"anything": 1})) != "SUCCESS"

    def counted() -> str | None:
        text = _scrape(port)
        return text if _unknown_count(text) >= before + len(names) else None

    assert not [name for name in names if name in eventually(counted)]
