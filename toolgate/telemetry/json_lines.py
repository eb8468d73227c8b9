"""Finished spans as compact JSON lines, appended to a file under `$TOOLGATE_HOME/telemetry/` (the
embedded default exporter), scrubbed of secrets.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

import orjson
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from toolgate.scrubber import SCRUBBER

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

    orjson writes it: every stage writes a line per call, and orjson writes one several times
    faster than the standard library's encoder (docs/performance.md, "Figures behind the code").
    What orjson refuses (an integer beyond 64 bits in an attribute) goes through the standard
    encoder. orjson leaves U+2028, U+2029 and U+0085 unescaped, and `str.splitlines` (as many
    readers of a lines file) splits at each: they are escaped, as the standard encoder did. Only a
    line with a byte beyond ASCII can hold one, so only such a line is searched (the three
    searches were a large share of a line's time, `isascii` next to nothing)."""
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
    own `copy()`, far cheaper than `dict()` of the view
    (docs/performance.md, "Figures behind the code")."""
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
