"""A stage's call spans, recorded whole (toolgate/call_spans.py): the same spans the SDK's span
API makes, parented and sampled the same way."""

from __future__ import annotations

import json

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from opentelemetry.trace import SpanKind, Status, StatusCode

from toolgate.call_spans import CallSpans
from toolgate.telemetry import parent_context, parse_traceparent, span_line
from toolgate.topics.headers import format_traceparent

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


def comparable(line: str) -> dict[str, object]:
    """A span's JSON line without what differs between any two spans: ids and times."""
    span = json.loads(line)
    return {k: v for k, v in span.items() if k not in ("span_id", "start", "end")}


def test_a_call_span_is_the_span_the_sdk_api_makes_for_the_same_call() -> None:
    sdk, exporter, processor = provider()
    spans = CallSpans("toolgate.policy", sdk, processor)
    remote = parse_traceparent(PARENT)
    span = spans.open(remote, OPENED)
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


def test_a_span_ended_without_error_is_unset_and_carries_both_sets_of_attributes() -> None:
    sdk, exporter, processor = provider()
    spans = CallSpans("toolgate.policy", sdk, processor)
    span = spans.open(parse_traceparent(PARENT), OPENED)
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
    following = CallSpans("toolgate.policy", sdk, processor).open(parse_traceparent(first.traceparent), OPENED)
    assert following is not None and following.context.trace_id == first.context.trace_id
    assert following.parent is not None and following.parent.span_id == first.context.span_id


def test_a_trace_the_sampler_drops_is_not_recorded_and_says_so_onward() -> None:
    sdk, exporter, processor = provider(ratio=0.0)
    spans = CallSpans("toolgate.validation", sdk, processor)
    span = spans.open(None, OPENED)
    assert span is not None and span.traceparent.endswith("-00")
    spans.end(span, CLOSED)
    assert exporter.get_finished_spans() == ()
