"""Every worker's `/metrics`: the OpenTelemetry meter provider read by Prometheus.

The OpenTelemetry Prometheus exporter (`opentelemetry-exporter-prometheus`, the OpenTelemetry
project's own reader over `prometheus_client`) turns the process's instruments into Prometheus
series when scraped; `prometheus_client` serves them over HTTP. So the instruments stay
OpenTelemetry's and an OTLP export (`toolgate[otlp]`) sees the same ones.

The port: `TOOLGATE_METRICS_PORT` (`toolgate up` gives each worker its own, kept in
`ports.json`; docker-compose gives every container 9464), 0 for any free port, -1 for none. The
port the worker really listens on is written to `$TOOLGATE_HOME/metrics/<prefix><service>.json`
(with its pid), which `toolgate up` copies into `runtime.json` under `metrics`.

One reader serves both `/metrics` and the periodic export (the JSON-lines file, or OTLP): the
SDK keeps a storage per reader and records every measurement into each, so a second reader made
every histogram record dearer, on every call (docs/performance.md, "Figures behind the code").

Names, as Prometheus sees them: dots become underscores, counters end in `_total`, and the unit
is a suffix (`toolgate.round.duration` in s is `toolgate_round_duration_seconds`).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
from pathlib import Path
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics.export import MetricExporter, MetricsData
from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View
from prometheus_client import make_wsgi_app

from toolgate.settings import Settings

log = logging.getLogger("toolgate.metrics")

# Latency histograms in seconds need buckets below one second; the SDK's defaults start at 5.
SECONDS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
MS_BUCKETS = (5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0, 30000.0, 60000.0, 300000.0)
EXPORT_EVERY_S = 10.0  # how often metrics go to the file (or OTLP)
ROUND_SIZE_BUCKETS = (1.0, 2.0, 5.0, 10.0, 25.0, 50.0, 100.0, 200.0, 500.0)
# How often the `/metrics` server's thread looks up from its select when no scrape comes. Only a
# shutdown waits for that, and no worker shuts its server down (the thread is a daemon).
# prometheus_client's start_http_server keeps serve_forever's 0.5 s: two wake-ups a second, CPU
# spent for nothing in each idle worker (docs/performance.md, "Figures behind the code").
SERVER_LOOK_S = 60.0


def views() -> list[View]:
    """Bucket boundaries that fit what toolgate measures."""
    return [
        View(
            instrument_name="toolgate.round.duration", aggregation=ExplicitBucketHistogramAggregation(SECONDS_BUCKETS)
        ),
        View(instrument_name="toolgate.round.size", aggregation=ExplicitBucketHistogramAggregation(ROUND_SIZE_BUCKETS)),
        View(instrument_name="tool.invocation.latency", aggregation=ExplicitBucketHistogramAggregation(MS_BUCKETS)),
        View(
            instrument_name="tool.approval.resolution_time", aggregation=ExplicitBucketHistogramAggregation(MS_BUCKETS)
        ),
    ]


def port_file(settings: Settings, service: str) -> Path:
    return settings.home / "metrics" / f"{settings.topic_prefix}{service}.json"


class ExportingPrometheusReader(PrometheusMetricReader):
    """Prometheus's reader that also hands what it holds to `exporter` every `interval_s`, and
    once more at shutdown, as the SDK's periodic reader would. Both read the same cumulative
    state: a scrape and an export never take each other's collection."""

    def __init__(self, exporter: MetricExporter, interval_s: float) -> None:
        super().__init__()
        self._exporter = exporter
        self._interval_s = interval_s
        self._exporting = threading.local()  # set while the exporter's own collection runs
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._ticker, name="toolgate-metrics-export", daemon=True)
        self._thread.start()

    def _ticker(self) -> None:
        while not self._stop.wait(self._interval_s):
            self._export()
        self._export()

    def _export(self) -> None:
        self._exporting.active = True
        try:
            self.collect()
        except Exception as exc:  # a failed export loses one interval, never the worker
            log.warning("metrics export failed", extra={"action": "metrics_export_failed", "error": repr(exc)})
        finally:
            self._exporting.active = False

    def _receive_metrics(self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any) -> None:
        if getattr(self._exporting, "active", False):
            self._exporter.export(metrics_data, timeout_millis=timeout_millis)
        else:
            super()._receive_metrics(metrics_data, timeout_millis, **kwargs)

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self._stop.set()
        self._thread.join(timeout_millis / 1000)
        self._exporter.shutdown()
        super().shutdown(timeout_millis, **kwargs)


def prometheus_reader(
    settings: Settings, service: str, exporter: MetricExporter | None = None, interval_s: float = EXPORT_EVERY_S
) -> PrometheusMetricReader | None:
    """Serve `/metrics` for this process and return the reader to install, which also exports
    to `exporter` every `interval_s` if one is given; None when the port is -1. A configured port
    that is taken falls back to a free one, said in the log."""
    if settings.metrics_port < 0:
        return None
    reader = PrometheusMetricReader() if exporter is None else ExportingPrometheusReader(exporter, interval_s)
    try:
        server = _serve(settings.metrics_port, settings.metrics_addr)
    except OSError:
        log.warning(
            "metrics port %d is taken; listening on a free port",
            settings.metrics_port,
            extra={"stage": service, "action": "metrics_port_taken"},
        )
        server = _serve(0, settings.metrics_addr)
    port = int(server.server_address[1])
    path = port_file(settings, service)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"pid": os.getpid(), "port": port, "addr": settings.metrics_addr}))
    tmp.replace(path)
    log.info("metrics on port %d", port, extra={"stage": service, "action": "metrics"})
    return reader


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # a scrape is not worth a log line
        pass


def _serve(port: int, addr: str) -> WSGIServer:
    """`/metrics` (prometheus_client's default registry, where the reader collects) on `port`
    of `addr`, from a daemon thread, as prometheus_client's start_http_server serves it."""
    family = socket.getaddrinfo(addr or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
    server_class = type("MetricsServer", (_Server,), {"address_family": family})
    server: WSGIServer = make_server(addr, port, make_wsgi_app(), server_class, handler_class=_Quiet)
    serving = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": SERVER_LOOK_S}, name="metrics-http", daemon=True
    )
    serving.start()
    return server


def reported_port(settings: Settings, service: str, pid: int) -> int | None:
    """The port the worker `service` with this pid said it listens on, if it said so."""
    try:
        found = json.loads(port_file(settings, service).read_text())
    except (OSError, ValueError):
        return None
    return int(found["port"]) if found.get("pid") == pid else None
