"""A worker's /metrics port (toolgate/telemetry/metrics_export.py): the one it was given, a free one when
that is taken, none at -1, and the port it really listens on recorded for `toolgate up`."""

from __future__ import annotations

import io
import json
import os
import socket
import time
import urllib.request
from collections import deque
from pathlib import Path

import pytest
from opentelemetry.sdk.metrics import AlwaysOffExemplarFilter, MeterProvider
from opentelemetry.sdk.metrics.export import ConsoleMetricExporter

from toolgate.settings import Settings
from toolgate.telemetry.metrics_export import ExportingPrometheusReader, port_file, prometheus_reader, reported_port
from toolgate.telemetry.setup import exemplar_filter


def test_no_metrics_server_at_minus_one(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, metrics_port=-1)
    assert prometheus_reader(settings, "policy") is None
    assert not port_file(settings, "policy").exists()


def test_a_taken_port_falls_back_to_a_free_one_and_the_real_port_is_recorded(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        settings = Settings(home=tmp_path, metrics_port=busy, topic_prefix="t1-")
        assert prometheus_reader(settings, "execution") is not None
        port = reported_port(settings, "execution", os.getpid())
        assert port is not None and port != busy
        assert port_file(settings, "execution").name == "t1-execution.json"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            assert response.status == 200
    assert reported_port(settings, "execution", os.getpid() + 1) is None  # another process's report
    assert reported_port(settings, "policy", os.getpid()) is None  # none at all


def test_exemplars_are_offered_only_where_an_otlp_backend_receives_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OTEL_METRICS_EXEMPLAR_FILTER", raising=False)
    for exporter in ("file", "none"):
        chosen = exemplar_filter(Settings(home=tmp_path, telemetry_exporter=exporter))
        assert isinstance(chosen, AlwaysOffExemplarFilter)
    assert exemplar_filter(Settings(home=tmp_path, telemetry_exporter="otlp")) is None  # the SDK's default
    monkeypatch.setenv("OTEL_METRICS_EXEMPLAR_FILTER", "always_on")
    assert exemplar_filter(Settings(home=tmp_path, telemetry_exporter="file")) is None  # the operator's


def test_one_reader_serves_the_scrape_and_the_periodic_export(tmp_path: Path) -> None:
    """Each measurement is recorded once, into one reader that both /metrics and the file read."""
    lines: list[str] = []
    file_exporter = ConsoleMetricExporter(out=io.StringIO(), formatter=lambda m: lines.append(m.to_json()) or "")
    settings = Settings(home=tmp_path, metrics_port=0, topic_prefix="t2-")
    reader = prometheus_reader(settings, "policy", file_exporter, interval_s=0.1)
    assert isinstance(reader, ExportingPrometheusReader)
    provider = MeterProvider(metric_readers=[reader])
    counter = provider.get_meter("test").create_counter("toolgate.calls")
    counter.add(3, {"stage": "policy"})
    deadline = time.monotonic() + 5
    while len(lines) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(lines) >= 3  # several exports, none of them left queued for a scrape
    assert reader._collector._metrics_datas == deque()  # what would grow unscraped
    port = reported_port(settings, "policy", os.getpid())
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        scraped = response.read().decode()
    (calls,) = [line for line in scraped.splitlines() if line.startswith("toolgate_calls_total{")]
    assert 'stage="policy"' in calls and calls.endswith(" 3.0")
    counter.add(2, {"stage": "policy"})
    provider.shutdown()  # the last export has the last measurement
    last = json.loads(lines[-1])
    (point,) = last["resource_metrics"][0]["scope_metrics"][0]["metrics"][0]["data"]["data_points"]
    assert point["value"] == 5
