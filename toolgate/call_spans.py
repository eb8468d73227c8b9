"""A stage's span of one call, recorded whole when the call's round ends.

Every stage opens one span per call: under load, thousands a second in each process. Through the
SDK's span API one such span cost 125-155 µs of CPU on this machine, export included: its
attributes are checked one by one as they are set, under a lock, at the start and again at the
end. That was a fifth to a half of what a stage spends on a call. These spans need none of that
API: their parent is the traceparent the call carries, their attributes are `span_attributes`'
primitive values, and they end when the round does, with nothing recorded in between. So a
`CallSpans` takes the provider's own sampler, id generator and resource, builds each span as the
SDK's finished span (`ReadableSpan`, what exporters read) and hands it to the span processor the
provider exports through (`telemetry.configure_telemetry`): 50-65 µs a span, export included
(20,000 spans measured alone, alternating).

Where the spans go to the JSON-lines file (`TOOLGATE_TELEMETRY_EXPORTER=file`, what `toolgate up`
uses), a call's span does not become the SDK's span object at all: its line is written from its
own values when it ends, and a round's lines are appended at once when the round's spans have
ended (`flush`), in the stage's own thread. Through the span processor's queue and export
thread, a span's end and export cost approval-wait a quarter of its CPU at full speed (py-spy);
written here, approval-wait took 53-57 µs a call instead of 58-60 (3 pairs, alternating): the
line itself is still made per call. Spans to OTLP still go through the processor, whose
exporter needs the SDK's object.

Sampling is the provider's: a call whose parent was not sampled gets no span and passes its
parent's traceparent on; one without a parent starts a trace if the sampler says so. When that
sampler lets a sampled remote parent decide (`ParentBased` with its default `AlwaysOnSampler`
there, as `configure_telemetry` installs), a call whose parent was sampled is recorded without
asking it: what it would answer is known (RECORD_AND_SAMPLE, the parent's trace state, no
attributes), and asking cost 7 of the 13 µs a span took to open.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeGuard, cast

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.sampling import Decision, ParentBased, Sampler
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from toolgate.telemetry import JsonLinesSpanExporter, line_of, parent_context, span_lines, span_processor
from toolgate.topics.headers import format_traceparent

log = logging.getLogger("toolgate.telemetry")
Attributes = Mapping[str, str | bool | int]
SCOPE = InstrumentationScope("toolgate")
SAMPLED = TraceFlags(TraceFlags.SAMPLED)


def parent_decides(sampler: Sampler) -> bool:
    """Whether `sampler` records every call whose remote parent was sampled, adding nothing:
    a `ParentBased` that kept its default for that case (its description names it)."""
    if type(sampler) is not ParentBased:
        return False
    description = str(sampler.get_description())  # type: ignore[no-untyped-call]
    return "remoteParentSampled:AlwaysOnSampler," in description


@dataclass(slots=True)
class CallSpan:
    """A call's span while its round runs."""

    context: SpanContext
    parent: SpanContext | None
    start_ns: int
    attributes: dict[str, str | bool | int]

    @property
    def traceparent(self) -> str:
        ctx = self.context
        return format_traceparent(ctx.trace_id, ctx.span_id, ctx.trace_flags.sampled)


def _sampled_remote(parent: SpanContext | None) -> TypeGuard[SpanContext]:
    return parent is not None and parent.is_remote and parent.is_valid and parent.trace_flags.sampled


class CallSpans:
    """Opens and ends the spans named `name` of one stage's calls."""

    def __init__(
        self,
        name: str,
        provider: TracerProvider | None = None,
        processor: SpanProcessor | None = None,
        kind: SpanKind = SpanKind.CONSUMER,
        lines: JsonLinesSpanExporter | None = None,
    ) -> None:
        self.name = name
        self.kind = kind
        self._provider = provider
        self._processor = processor
        self._lines = lines
        self._ended: list[bytes] = []  # lines of the spans ended since the last `flush`
        self._parent_decides = provider is not None and parent_decides(provider.sampler)

    def _sdk(self) -> TracerProvider | None:
        """The SDK's provider once the process installed it (stages are built before that).
        Without it there is nothing to record: calls pass their parent's traceparent on, as the
        API's non-recording spans would."""
        if self._provider is None:
            found = trace.get_tracer_provider()
            if isinstance(found, TracerProvider):
                self._provider, self._processor, self._lines = found, span_processor(), span_lines()
                self._parent_decides = parent_decides(found.sampler)
        return self._provider

    def open(self, parent: SpanContext | None, attributes: Attributes) -> CallSpan | None:
        """A call's span, started now: sampled (recorded when it ends) or not (its traceparent
        says so to the stages after this one); None without the SDK."""
        provider = self._sdk()
        if provider is None:
            return None
        ids = provider.id_generator
        if self._parent_decides and _sampled_remote(parent):
            followed = SpanContext(
                parent.trace_id,
                ids.generate_span_id(),
                is_remote=False,
                trace_flags=SAMPLED,
                trace_state=parent.trace_state,
            )
            return CallSpan(followed, parent, time.time_ns(), dict(attributes))
        trace_id = parent.trace_id if parent is not None else ids.generate_trace_id()
        context = parent_context(parent) if parent is not None else None
        sampling = provider.sampler.should_sample(context, trace_id, self.name, self.kind)
        flags = TraceFlags.SAMPLED if sampling.decision is Decision.RECORD_AND_SAMPLE else TraceFlags.DEFAULT
        span_context = SpanContext(
            trace_id,
            ids.generate_span_id(),
            is_remote=False,
            trace_flags=TraceFlags(flags),
            trace_state=sampling.trace_state,
        )
        added = cast(Attributes, sampling.attributes or {})  # what the sampler adds (ours add nothing)
        return CallSpan(span_context, parent, time.time_ns(), {**attributes, **added})

    def end(self, span: CallSpan, attributes: Attributes, error: str | None = None) -> None:
        """End `span` now with `attributes` added; `error` marks it failed with that description."""
        if self._provider is None or not span.context.trace_flags.sampled:
            return
        span.attributes.update(attributes)
        if self._lines is not None:
            self._ended.append(
                line_of(
                    span.context.trace_id,
                    span.context.span_id,
                    span.parent.span_id if span.parent is not None else None,
                    self.name,
                    self.kind.name,
                    span.start_ns,
                    time.time_ns(),
                    StatusCode.ERROR.name if error is not None else StatusCode.UNSET.name,
                    self._provider.resource.attributes.get("service.name"),
                    span.attributes,
                )
            )
            return
        if self._processor is None:
            return
        self._processor.on_end(
            ReadableSpan(
                self.name,
                context=span.context,
                parent=span.parent,
                resource=self._provider.resource,
                attributes=span.attributes,
                kind=self.kind,
                status=Status(StatusCode.ERROR, error) if error is not None else Status(StatusCode.UNSET),
                start_time=span.start_ns,
                end_time=time.time_ns(),
                instrumentation_scope=SCOPE,
            )
        )

    def flush(self) -> None:
        """Write the lines of the spans ended since the last flush (a round's), at once. A file
        that cannot be written loses those spans, never the round (as the SDK's export thread
        would lose them)."""
        ended, self._ended = self._ended, []
        if not ended or self._lines is None:
            return
        try:
            self._lines.write(ended)
        except (OSError, ValueError) as exc:  # a full disk, a closed file
            log.warning("spans not written", extra={"action": "spans_lost", "count": len(ended), "error": repr(exc)})
