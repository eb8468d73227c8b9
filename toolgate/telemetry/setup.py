"""A process's tracer and meter providers, installed once (`configure_telemetry`), and what
they export to: `file` (the embedded default) writes JSON lines under
`$TOOLGATE_HOME/telemetry/`, `otlp` sends to OTEL_EXPORTER_OTLP_ENDPOINT (install
`toolgate[otlp]`), `none` keeps the API calls but exports nothing.
"""

from __future__ import annotations

import os
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.metrics import Meter
from opentelemetry.sdk.metrics import AlwaysOffExemplarFilter, ExemplarFilter, MeterProvider
from opentelemetry.sdk.metrics.export import (
    ConsoleMetricExporter,
    MetricExporter,
    MetricReader,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from opentelemetry.trace import Tracer

from toolgate.settings import Settings
from toolgate.telemetry.json_lines import JsonLinesSpanExporter
from toolgate.telemetry.metrics_export import EXPORT_EVERY_S, prometheus_reader, views


def exemplar_filter(settings: Settings) -> ExemplarFilter | None:
    """Exemplars (a sampled trace beside a measurement) reach only an OTLP backend: Prometheus's
    exporter and the JSON-lines file drop or bury them, and offering each measurement one made
    every record dearer (docs/performance.md, "Figures behind the code"). So: the SDK's default
    (trace-based, or OTEL_METRICS_EXEMPLAR_FILTER) with OTLP, none otherwise."""
    if settings.telemetry_exporter == "otlp" or os.environ.get("OTEL_METRICS_EXEMPLAR_FILTER"):
        return None
    return AlwaysOffExemplarFilter()


def _metric_exporter(settings: Settings, service: str) -> MetricExporter | None:
    if settings.telemetry_exporter == "file":
        path = settings.telemetry_dir / f"metrics-{service}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        out = open(path, "a", buffering=1)  # noqa: SIM115 - lives as long as the process
        return ConsoleMetricExporter(out=out, formatter=lambda m: m.to_json(indent=None) + "\n")
    if settings.telemetry_exporter == "otlp":
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

        otlp_metrics: MetricExporter = OTLPMetricExporter()  # an optional extra: untyped when absent
        return otlp_metrics
    return None


def _span_exporter(settings: Settings, service: str) -> SpanExporter | None:
    if settings.telemetry_exporter == "file":
        return JsonLinesSpanExporter(settings.telemetry_dir / f"spans-{service}.jsonl")
    if settings.telemetry_exporter == "otlp":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        otlp_spans: SpanExporter = OTLPSpanExporter()
        return otlp_spans
    return None


_configured: dict[str, Any] = {}


def configure_telemetry(settings: Settings, service: str) -> None:
    """Install the tracer and meter providers of this process (once)."""
    if _configured:
        return
    resource = Resource.create({"service.name": f"toolgate-{service}", "service.instance.id": str(os.getpid())})
    provider = TracerProvider(resource=resource, sampler=ParentBased(TraceIdRatioBased(settings.trace_sample_ratio)))
    span_exporter = _span_exporter(settings, service)
    processor = None
    if span_exporter is not None:
        processor = BatchSpanProcessor(span_exporter, max_queue_size=65536, schedule_delay_millis=1000)
        provider.add_span_processor(processor)
    trace.set_tracer_provider(provider)
    # One reader: Prometheus's, exporting to the file (or OTLP) as well; the SDK's periodic
    # reader only when there is no /metrics (metrics_export.py says why).
    readers: list[MetricReader] = []
    metric_exporter = _metric_exporter(settings, service)
    prometheus = prometheus_reader(settings, service, metric_exporter)
    if prometheus is not None:
        readers.append(prometheus)
    elif metric_exporter is not None:
        readers.append(PeriodicExportingMetricReader(metric_exporter, export_interval_millis=EXPORT_EVERY_S * 1000))
    meter_provider = MeterProvider(
        resource=resource, metric_readers=readers, views=views(), exemplar_filter=exemplar_filter(settings)
    )
    metrics.set_meter_provider(meter_provider)
    lines = span_exporter if isinstance(span_exporter, JsonLinesSpanExporter) else None
    _configured.update(tracer=provider, meter=meter_provider, spans=processor, lines=lines)


def shutdown_telemetry() -> None:
    if _configured:
        _configured["tracer"].shutdown()
        _configured["meter"].shutdown()
        _configured.clear()


def span_processor() -> SpanProcessor | None:
    """What this process's spans are exported through (None: not configured, or not exported)."""
    processor: SpanProcessor | None = _configured.get("spans")
    return processor


def span_lines() -> JsonLinesSpanExporter | None:
    """The JSON-lines file this process's spans are exported to, if that is where they go."""
    lines: JsonLinesSpanExporter | None = _configured.get("lines")
    return lines


def tracer() -> Tracer:
    return trace.get_tracer("toolgate")


def meter() -> Meter:
    return metrics.get_meter("toolgate")
