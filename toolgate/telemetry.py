"""OpenTelemetry spans and metrics, and structured logs.

One trace per tool call: the agent's client starts it (W3C traceparent in the proposal's
headers); every stage opens a span per call as a child of the traceparent it received and
hands its own span's traceparent to the next stage inside the StageRecord.

Export: `file` (the embedded default) writes JSON lines under `$TOOLGATE_HOME/telemetry/`,
`otlp` sends to OTEL_EXPORTER_OTLP_ENDPOINT (install `toolgate[otlp]`), `none` keeps the API
calls but exports nothing.

Secrets: log records and spans pass through the scrubber (toolgate/scrubber.py), with every
secret value registered there.
"""

from __future__ import annotations

import json
import logging
import logging.config
import os
import re
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

import orjson
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
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, Tracer, TraceState

from toolgate.metrics_export import EXPORT_EVERY_S, prometheus_reader, views
from toolgate.scrubber import SCRUBBER
from toolgate.settings import Settings

# --- logs ----------------------------------------------------------------------------------


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and the record's fields
    (call_id, stage, action, ...), scrubbed of secrets."""

    FIELDS = ("stage", "action", "call_id", "tenant_id", "tool", "taxonomy", "count", "error")

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for name in self.FIELDS:
            if hasattr(record, name):
                entry[name] = getattr(record, name)
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return SCRUBBER.text(json.dumps(entry, default=str))


NOISY = ("kafka",)


def logging_config(level: str = "INFO") -> dict[str, Any]:
    """A dictConfig: one JSON-lines handler on stderr; the libraries' chatter at WARNING."""
    quiet = "WARNING" if logging.getLevelName(level) < logging.WARNING else level
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": JsonFormatter}},
        "handlers": {"json": {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}},
        "root": {"level": level, "handlers": ["json"]},
        "loggers": {name: {"level": quiet} for name in NOISY},
    }


def configure_logging(level: str = "INFO") -> None:
    logging.config.dictConfig(logging_config(level))


# --- traces and metrics --------------------------------------------------------------------


_SPAN_JSON = json.JSONEncoder(separators=(",", ":"), default=str)


def span_line(span: ReadableSpan) -> bytes:
    """One finished span as a compact JSON line (ids in hex, times in epoch nanoseconds), UTF-8."""
    ctx = span.context
    parent = span.parent
    return line_of(
        f"{ctx.trace_id:032x}" if ctx else None,
        f"{ctx.span_id:016x}" if ctx else None,
        f"{parent.span_id:016x}" if parent else None,
        span.name,
        span.kind.name,
        span.start_time,
        span.end_time,
        span.status.status_code.name,
        span.resource.attributes.get("service.name"),
        _plain(span.attributes),
    )


def line_of(
    trace_id: str | None,
    span_id: str | None,
    parent_id: str | None,
    name: str,
    kind: str,
    start: int | None,
    end: int | None,
    status: str,
    service: object,
    attributes: dict[str, Any],
) -> bytes:
    """A span's JSON line from its parts, its ids in hex (`span_line`'s, and call_spans.py's for a
    call's span, which never becomes the SDK's span object).

    orjson writes it: every stage writes a line per call, and the standard library's encoder
    took 23 µs for one (~800 bytes, 14 attributes), orjson under 5 (measured here). What orjson
    refuses (an integer beyond 64 bits in an attribute) goes through the standard encoder.
    orjson leaves U+2028, U+2029 and U+0085 unescaped, and `str.splitlines` (as many readers of
    a lines file) splits at each: they are escaped, as the standard encoder did. Only a line with
    a byte beyond ASCII can hold one, so only such a line is searched (the three searches took
    2.4 µs of a line's ~8; `isascii` 0.05)."""
    document = {
        "trace_id": trace_id,
        "span_id": span_id,
        "parent_id": parent_id,
        "name": name,
        "kind": kind,
        "start": start,
        "end": end,
        "status": status,
        "service": service,
        "attributes": attributes,
    }
    try:
        line = orjson.dumps(document, default=str)
    except orjson.JSONEncodeError:
        return _SPAN_JSON.encode(document).encode()
    if not line.isascii() and (b"\xe2\x80\xa8" in line or b"\xe2\x80\xa9" in line or b"\xc2\x85" in line):
        line = line.replace(b"\xe2\x80\xa8", b"\\u2028").replace(b"\xe2\x80\xa9", b"\\u2029")
        line = line.replace(b"\xc2\x85", b"\\u0085")
    return line


def _plain(attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    """A span's attributes as a dict orjson takes: the dict behind a read-only view copied by its
    own `copy()` (0.1 µs, where `dict()` of the view took 1-2)."""
    if isinstance(attributes, MappingProxyType):
        return attributes.copy()
    return dict(attributes or {})


class JsonLinesSpanExporter(SpanExporter):
    """Appends each finished span as one compact JSON line to a file, a batch scrubbed at once."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(path, "ab")  # noqa: SIM115 - closed in shutdown
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.write([span_line(span) for span in spans])
        return SpanExportResult.SUCCESS

    def write(self, lines: Sequence[bytes]) -> None:
        """Append spans' lines (`line_of`), scrubbed; from any thread."""
        self.append(b"\n".join(lines) + b"\n")

    def append(self, block: bytes) -> None:
        """Append a block of spans' lines, each ending in a newline, scrubbed; from any thread."""
        data = SCRUBBER.bytes(block)
        with self._lock:
            self._file.write(data)
            self._file.flush()

    def shutdown(self) -> None:
        with self._lock:
            self._file.close()


def exemplar_filter(settings: Settings) -> ExemplarFilter | None:
    """Exemplars (a sampled trace beside a measurement) reach only an OTLP backend: Prometheus's
    exporter and the JSON-lines file drop or bury them, and offering each measurement one cost
    about a quarter of every record (~8 of 31 us for a histogram, measured here). So: the SDK's
    default (trace-based, or OTEL_METRICS_EXEMPLAR_FILTER) with OTLP, none otherwise."""
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


TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
ZERO_TRACE_ID, ZERO_SPAN_ID = "0" * 32, "0" * 16


class Parent(NamedTuple):
    """A remote parent span as a traceparent carries it: ids in hex, the flags, and (from a
    `SpanContext`, never from a traceparent) a trace state."""

    trace_id: str
    span_id: str
    flags: int
    trace_state: TraceState | None = None

    @property
    def sampled(self) -> bool:
        return bool(self.flags & TraceFlags.SAMPLED)

    def context(self) -> SpanContext:
        return SpanContext(
            int(self.trace_id, 16),
            int(self.span_id, 16),
            is_remote=True,
            trace_flags=TraceFlags(self.flags),
            trace_state=self.trace_state,
        )

    @classmethod
    def of(cls, ctx: SpanContext) -> Parent:
        return cls(f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}", int(ctx.trace_flags), ctx.trace_state)


def parent_of(traceparent: str | None) -> Parent | None:
    """A W3C traceparent's parent span, or None if it is missing, malformed or invalid (an id of
    zeros). The match fixes where each part is: they are sliced, not taken from its groups."""
    if not isinstance(traceparent, str) or TRACEPARENT.fullmatch(traceparent) is None:
        return None
    trace_id, span_id = traceparent[3:35], traceparent[36:52]
    if trace_id == ZERO_TRACE_ID or span_id == ZERO_SPAN_ID:
        return None
    return Parent(trace_id, span_id, int(traceparent[53:55], 16))


def parse_traceparent(traceparent: str | None) -> SpanContext | None:
    """A W3C traceparent as a remote SpanContext, or None if it is missing or malformed."""
    parent = parent_of(traceparent)
    return parent.context() if parent is not None else None


def parent_context(span_context: SpanContext) -> Any:
    return trace.set_span_in_context(NonRecordingSpan(span_context))


@contextmanager
def timed() -> Iterator[list[float]]:
    """Yields a one-element list that holds the elapsed seconds on exit."""
    box = [0.0]
    start = time.perf_counter()
    try:
        yield box
    finally:
        box[0] = time.perf_counter() - start
