"""A stage's call spans, recorded whole (toolgate/telemetry/call_spans.py): the same spans the SDK's span
API makes, parented and sampled the same way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, ParentBased, TraceIdRatioBased
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceState

from toolgate.telemetry.call_spans import CallSpans, parent_decides
from toolgate.telemetry.json_lines import JsonLinesSpanExporter, span_line
from toolgate.telemetry.traceparent import Parent, parent_context, parent_of, parse_traceparent
from toolgate.topics.headers import format_traceparent, new_traceparent

PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
OPENED = {"toolgate.stage": "policy", "tool.name": "invoice.create_draft", "messaging.source.partition": 2}
CLOSED = {"toolgate.outcome": "UNKNOWN_ERROR", "tool.retryable": False}


def provider(ratio: float = 1.0) -> tuple[TracerProvider, InMemorySpanExporter, SimpleSpanProcessor]:
    sdk = TracerProvider(
        resource=Resource.create({"service.name": "toolgate-policy"}),
        sampler=ParentBased(TraceIdRatioBased(ratio)),
    )
    exporter = InMemorySpanExporter()
    processor = SimpleSpanProcessor(exporter)
    sdk.add_span_processor(processor)
    return sdk, exporter, processor


def comparable(line: bytes) -> dict[str, object]:
    """A span's JSON line without what differs between any two spans: ids and times."""
    span = json.loads(line)
    return {k: v for k, v in span.items() if k not in ("span_id", "start", "end")}


def test_a_call_span_is_the_span_the_sdk_api_makes_for_the_same_call() -> None:
    sdk, exporter, processor = provider()
    spans = CallSpans("toolgate.policy", sdk, processor)
    remote = parse_traceparent(PARENT)
    assert remote is not None
    span = spans.open(parent_of(PARENT), OPENED)
    assert span is not None
    spans.end(span, CLOSED, "UNKNOWN_ERROR")

    through_api = sdk.get_tracer("toolgate").start_span(
        "toolgate.policy", context=parent_context(remote), kind=SpanKind.CONSUMER, attributes=OPENED
    )
    through_api.set_attributes(CLOSED)
    through_api.set_status(Status(StatusCode.ERROR, "UNKNOWN_ERROR"))
    through_api.end()

    ours, theirs = exporter.get_finished_spans()
    assert comparable(span_line(ours)) == comparable(span_line(theirs))
    assert ours.status.description == theirs.status.description == "UNKNOWN_ERROR"
    assert ours.parent is not None and f"{ours.parent.span_id:016x}" == "b7ad6b7169203331"
    assert ours.start_time is not None and ours.end_time is not None and ours.start_time <= ours.end_time
    # What the call carries onward names this span, sampled, in the agent's trace.
    assert ours.context is not None
    assert span.traceparent == format_traceparent(remote.trace_id, ours.context.span_id, True)


@pytest.mark.parametrize("error", ["UNKNOWN_ERROR", None])
def test_a_span_written_as_a_line_is_the_line_the_exporter_writes_for_it(tmp_path: Path, error: str | None) -> None:
    """With the JSON-lines file, a call's span is written from its own values (no SDK span
    object), a round's at once on `flush`: the same line as the SDK's span would give."""
    sdk, exporter, processor = provider()
    lines = JsonLinesSpanExporter(tmp_path / "spans.jsonl")
    direct = CallSpans("toolgate.policy", sdk, processor, lines=lines)
    through_sdk = CallSpans("toolgate.policy", sdk, processor)
    remote = parent_of(PARENT)
    first, second = direct.open(remote, OPENED), through_sdk.open(remote, OPENED)
    assert first is not None and second is not None
    direct.end(first, CLOSED, error)
    assert not (tmp_path / "spans.jsonl").read_bytes()  # nothing before the round's flush
    direct.flush()
    through_sdk.end(second, CLOSED, error)
    direct.flush()  # nothing ended since: nothing written
    lines.shutdown()
    written = (tmp_path / "spans.jsonl").read_bytes().splitlines()
    (theirs,) = exporter.get_finished_spans()  # the direct span never reached the processor
    assert len(written) == 1
    assert comparable(written[0]) == comparable(span_line(theirs))
    assert json.loads(written[0])["span_id"] == first.span_id == f"{first.context.span_id:016x}"


def test_spans_that_cannot_be_written_are_lost_not_the_round(tmp_path: Path) -> None:
    sdk, _, processor = provider()
    lines = JsonLinesSpanExporter(tmp_path / "spans.jsonl")
    spans = CallSpans("toolgate.policy", sdk, processor, lines=lines)
    span = spans.open(parent_of(PARENT), OPENED)
    assert span is not None
    spans.end(span, CLOSED)
    lines.shutdown()  # the file is closed: writing raises
    spans.flush()  # logged, not raised
    spans.flush()  # and not tried again
    assert (tmp_path / "spans.jsonl").read_bytes() == b""


def test_a_span_ended_without_error_is_unset_and_carries_both_sets_of_attributes() -> None:
    sdk, exporter, processor = provider()
    spans = CallSpans("toolgate.policy", sdk, processor)
    span = spans.open(parent_of(PARENT), OPENED)
    assert span is not None
    spans.end(span, {"toolgate.outcome": "forwarded"})
    (finished,) = exporter.get_finished_spans()
    assert finished.status.status_code is StatusCode.UNSET
    assert dict(finished.attributes or {}) == {**OPENED, "toolgate.outcome": "forwarded"}


def test_a_call_without_a_parent_starts_a_trace_the_later_stages_follow() -> None:
    sdk, _, processor = provider()
    spans = CallSpans("toolgate.validation", sdk, processor)
    first = spans.open(None, OPENED)
    assert first is not None and first.traceparent.endswith("-01")
    spans.end(first, CLOSED)
    following = CallSpans("toolgate.policy", sdk, processor).open(parent_of(first.traceparent), OPENED)
    assert following is not None and following.trace_id == first.trace_id
    assert following.parent is not None and following.parent.span_id == first.span_id


def test_a_trace_the_sampler_drops_is_not_recorded_and_says_so_onward() -> None:
    sdk, exporter, processor = provider(ratio=0.0)
    spans = CallSpans("toolgate.validation", sdk, processor)
    span = spans.open(None, OPENED)
    assert span is not None and span.traceparent.endswith("-00")
    spans.end(span, CLOSED)
    assert exporter.get_finished_spans() == ()


def test_a_sampler_that_does_not_follow_a_sampled_parent_is_still_asked() -> None:
    # The fast path holds only for ParentBased's default; a sampler that drops sampled remote
    # parents is asked, and its answer is kept.
    sdk = TracerProvider(sampler=ParentBased(TraceIdRatioBased(1.0), remote_parent_sampled=ALWAYS_OFF))
    exporter = InMemorySpanExporter()
    processor = SimpleSpanProcessor(exporter)
    assert not parent_decides(sdk.sampler)
    span = CallSpans("toolgate.policy", sdk, processor).open(parent_of(PARENT), OPENED)
    assert span is not None and span.traceparent.endswith("-00")
    assert exporter.get_finished_spans() == ()


def test_only_parent_based_with_its_default_for_sampled_remote_parents_lets_the_parent_decide() -> None:
    assert parent_decides(ParentBased(TraceIdRatioBased(0.25)))
    assert parent_decides(ParentBased(ALWAYS_OFF))
    assert not parent_decides(ParentBased(ALWAYS_ON, remote_parent_sampled=TraceIdRatioBased(0.5)))
    assert not parent_decides(TraceIdRatioBased(1.0))
    assert not parent_decides(ALWAYS_ON)


def test_a_sampled_parent_passes_its_trace_state_on() -> None:
    sdk, _, processor = provider()
    remote = parse_traceparent(PARENT)
    assert remote is not None
    with_state = SpanContext(
        remote.trace_id, remote.span_id, True, remote.trace_flags, TraceState([("vendor", "value")])
    )
    span = CallSpans("toolgate.policy", sdk, processor).open(Parent.of(with_state), OPENED)
    through_api = sdk.get_tracer("toolgate").start_span("toolgate.policy", context=parent_context(with_state))
    assert span is not None and through_api.get_span_context().trace_state == span.context.trace_state
    assert span.context.trace_state == TraceState([("vendor", "value")])


def test_a_malformed_traceparent_is_no_parent() -> None:
    for text in (
        None,
        "",
        PARENT.upper(),
        PARENT + "0",
        PARENT.replace("-", "_"),
        "00-00000000000000000000000000000000-b7ad6b7169203331-01",  # an invalid (zero) trace id
        "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
        "00-+af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    ):
        assert parse_traceparent(text) is None and parent_of(text) is None, text
    parsed = parse_traceparent(PARENT)
    assert parsed is not None and parsed.is_remote and parsed.trace_flags.sampled
    assert format_traceparent(parsed.trace_id, parsed.span_id, True) == PARENT
    parent = parent_of(PARENT)
    assert parent is not None and parent.sampled and parent.context() == parsed
    assert (parent.trace_id, parent.span_id) == (PARENT[3:35], PARENT[36:52])


def test_a_new_traceparent_is_a_valid_w3c_one_with_fresh_ids() -> None:
    made = [new_traceparent(sampled) for sampled in (True, False) * 50]
    parsed = [parse_traceparent(tp) for tp in made]
    assert all(ctx is not None for ctx in parsed)
    assert [ctx.trace_flags.sampled for ctx in parsed if ctx is not None] == [True, False] * 50
    assert len({tp[3:35] for tp in made}) == len({tp[36:52] for tp in made}) == 100
