"""The JSON-lines span file (toolgate/telemetry/json_lines.py): one parseable line per span, scrubbed of
every registered secret however it is spelled, whatever an attribute holds."""

from __future__ import annotations

import json
from pathlib import Path

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, TraceFlags

from toolgate.scrubber import SCRUBBER
from toolgate.telemetry.json_lines import JsonLinesSpanExporter, span_line


def finished(attributes: dict[str, object], span_id: int = 0xB7AD6B7169203331) -> ReadableSpan:
    context = SpanContext(0x0AF7651916CD43DD8448EB211C80319C, span_id, False, TraceFlags(TraceFlags.SAMPLED))
    return ReadableSpan(
        "toolgate.policy",
        context=context,
        resource=Resource.create({"service.name": "toolgate-policy"}),
        attributes=attributes,  # type: ignore[arg-type]
        start_time=1,
        end_time=2,
    )


def test_each_span_is_one_compact_json_line(tmp_path: Path) -> None:
    exporter = JsonLinesSpanExporter(tmp_path / "spans.jsonl")
    exporter.export([finished({"tool.name": "invoice.create_draft", "n": 3, "ok": True}), finished({}, 7)])
    exporter.shutdown()
    first, second = (json.loads(line) for line in (tmp_path / "spans.jsonl").read_text().splitlines())
    assert first == {
        "trace_id": "0af7651916cd43dd8448eb211c80319c",
        "span_id": "b7ad6b7169203331",
        "parent_id": None,
        "name": "toolgate.policy",
        "kind": "INTERNAL",
        "start": 1,
        "end": 2,
        "status": "UNSET",
        "service": "toolgate-policy",
        "attributes": {"tool.name": "invoice.create_draft", "n": 3, "ok": True},
    }
    assert second["span_id"] == "0000000000000007" and second["attributes"] == {}
    assert b" " not in span_line(finished({"a": 1}))


def test_a_secret_is_scrubbed_from_the_file_even_when_it_is_not_ascii(tmp_path: Path) -> None:
    secret = "pässwörd-Ωmega-4711"
    SCRUBBER.register(secret)
    exporter = JsonLinesSpanExporter(tmp_path / "spans.jsonl")
    exporter.export([finished({"tool.error_code": f"refused for {secret}"})])
    exporter.shutdown()
    text = (tmp_path / "spans.jsonl").read_text(encoding="utf-8")
    assert secret not in text and "4711" not in text
    assert json.loads(text)["attributes"]["tool.error_code"] == f"refused for {SCRUBBER.MARK}"


def test_an_integer_beyond_64_bits_is_still_written() -> None:
    assert json.loads(span_line(finished({"big": 2**70, "seq": (1, 2)})))["attributes"] == {
        "big": 2**70,
        "seq": [1, 2],
    }


def test_every_line_break_python_knows_stays_inside_its_line(tmp_path: Path) -> None:
    # `str.splitlines`, as readers of a lines file use it, also splits at U+2028, U+2029, U+0085
    # and the ASCII separators: an attribute holding any of them must not cut its span's line.
    breaks = "a\nb\rc\x0bd\x0ce\x1cf\x1dg\x1eh\x85i\u2028j\u2029k"
    exporter = JsonLinesSpanExporter(tmp_path / "spans.jsonl")
    exporter.export([finished({"tool.name": breaks}), finished({"tool.call_id": breaks}, 7)])
    exporter.shutdown()
    lines = (tmp_path / "spans.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2
    assert json.loads(lines[0])["attributes"] == {"tool.name": breaks}
    assert json.loads(lines[1])["attributes"] == {"tool.call_id": breaks}
