"""A stage's span of one call, recorded whole when the call's round ends.

Every stage opens one span per call: under load, thousands a second in each process. Through the
SDK's span API such a span was a large share of what a stage spends on a call, export included
(docs/performance.md, "Figures behind the code"): its attributes are checked one by one as they
are set, under a lock, at the start and again at the end. These spans need none of that
API: their parent is the traceparent the call carries, their attributes are `span_attributes`'
primitive values, and they end when the round does, with nothing recorded in between. So a
`CallSpans` takes the provider's own sampler, id generator and resource, and keeps a span as the
text a traceparent and a span's line are made of (its ids in hex), never as OpenTelemetry's
`SpanContext` objects: a call's ids arrive as hex in its traceparent and leave as hex, in the
traceparent it carries onward and in its line.

Where the spans go to the JSON-lines file (`TOOLGATE_TELEMETRY_EXPORTER=file`, what `toolgate up`
uses), a call's span does not become the SDK's span object at all: its line is written from its
own values when it ends, and a round's lines are appended at once when the round's spans have
ended (`flush`), in the stage's own thread. Spans to OTLP still go through the provider's span
processor, as the SDK's finished span (`ReadableSpan`), which its exporter needs.

With the ids held as text, opening, ending and writing a span cost far less than with them held
as `SpanContext`s, every step of it (docs/performance.md, "Figures behind the code").

Sampling is the provider's: a call whose parent was not sampled gets no span and passes its
parent's traceparent on; one without a parent starts a trace if the sampler says so. When that
sampler lets a sampled remote parent decide (`ParentBased` with its default `AlwaysOnSampler`
there, as `configure_telemetry` installs), a call whose parent was sampled is recorded without
asking it: what it would answer is known (RECORD_AND_SAMPLE, the parent's trace state, no
attributes), and asking was most of what opening a span cost
(docs/performance.md, "Figures behind the code").
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import cast

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.sampling import Decision, ParentBased, Sampler
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState

from toolgate.telemetry.json_lines import JsonLinesSpanExporter, line_of
from toolgate.telemetry.setup import span_lines, span_processor
from toolgate.telemetry.traceparent import Parent, parent_context

log = logging.getLogger("toolgate.telemetry")
Attributes = Mapping[str, str | bool | int]
SCOPE = InstrumentationScope("toolgate")
UNSET, ERROR = StatusCode.UNSET.name, StatusCode.ERROR.name


def parent_decides(sampler: Sampler) -> bool:
    """Whether `sampler` records every call whose remote parent was sampled, adding nothing:
    a `ParentBased` that kept its default for that case (its description names it)."""
    if type(sampler) is not ParentBased:
        return False
    description = str(sampler.get_description())  # type: ignore[no-untyped-call]
    return "remoteParentSampled:AlwaysOnSampler," in description


@dataclass(slots=True)
class CallSpan:
    """A call's span while its round runs: its ids in hex, as traceparents and lines carry them."""

    trace_id: str  # 32 hex digits
    span_id: str  # 16 hex digits
    parent: Parent | None
    sampled: bool
    trace_state: TraceState | None
    start_ns: int
    attributes: dict[str, str | bool | int]

    @property
    def traceparent(self) -> str:
        return f"00-{self.trace_id}-{self.span_id}-{'01' if self.sampled else '00'}"

    @property
    def context(self) -> SpanContext:
        """The span as OpenTelemetry holds it (for the SDK's span processor)."""
        flags = TraceFlags(TraceFlags.SAMPLED if self.sampled else TraceFlags.DEFAULT)
        return SpanContext(
            int(self.trace_id, 16),
            int(self.span_id, 16),
            is_remote=False,
            trace_flags=flags,
            trace_state=self.trace_state,
        )


@dataclass(slots=True, eq=False)
class CallSpans:
    """Opens and ends the spans named `name` of one stage's calls."""

    name: str
    provider: TracerProvider | None = None
    processor: SpanProcessor | None = None
    kind: SpanKind = SpanKind.CONSUMER
    lines: JsonLinesSpanExporter | None = None
    # The lines of the spans ended since the last `flush`, each copied here as it is made:
    # holding orjson's own outputs until the round's end (allocated anew and kept, each took
    # fresh memory) cost far more than copying them
    # (docs/performance.md, "Figures behind the code").
    _ended: bytearray = field(init=False, default_factory=bytearray)
    _parent_decides: bool = field(init=False, default=False)
    _service: object = field(init=False, default=None)

    def __post_init__(self) -> None:
        if self.provider is not None:
            self._use(self.provider)

    def _use(self, provider: TracerProvider) -> None:
        self.provider = provider
        self._parent_decides = parent_decides(provider.sampler)
        self._service = provider.resource.attributes.get("service.name")

    def _sdk(self) -> TracerProvider | None:
        """The SDK's provider once the process installed it (stages are built before that).
        Without it there is nothing to record: calls pass their parent's traceparent on, as the
        API's non-recording spans would."""
        if self.provider is None:
            found = trace.get_tracer_provider()
            if isinstance(found, TracerProvider):
                self.processor, self.lines = span_processor(), span_lines()
                self._use(found)
        return self.provider

    def open(self, parent: Parent | None, attributes: Attributes) -> CallSpan | None:
        """A call's span, started now: sampled (recorded when it ends) or not (its traceparent
        says so to the stages after this one); None without the SDK."""
        provider = self._sdk()
        if provider is None:
            return None
        span_id = f"{provider.id_generator.generate_span_id():016x}"
        if self._parent_decides and parent is not None and parent.flags & TraceFlags.SAMPLED:
            return CallSpan(
                parent.trace_id, span_id, parent, True, parent.trace_state, time.time_ns(), dict(attributes)
            )
        if parent is not None:
            trace_id = int(parent.trace_id, 16)
            context = parent_context(parent.context())
        else:
            trace_id, context = provider.id_generator.generate_trace_id(), None
        sampling = provider.sampler.should_sample(context, trace_id, self.name, self.kind)
        sampled = sampling.decision is Decision.RECORD_AND_SAMPLE
        added = cast(Attributes, sampling.attributes or {})  # what the sampler adds (ours add nothing)
        return CallSpan(
            f"{trace_id:032x}", span_id, parent, sampled, sampling.trace_state, time.time_ns(), {**attributes, **added}
        )

    def end(self, span: CallSpan, attributes: Attributes, error: str | None = None) -> None:
        """End `span` now with `attributes` added; `error` marks it failed with that description."""
        if self.provider is None or not span.sampled:
            return
        span.attributes.update(attributes)
        if self.lines is not None:
            self._ended += line_of(
                span.trace_id,
                span.span_id,
                span.parent.span_id if span.parent is not None else None,
                self.name,
                self.kind.name,
                span.start_ns,
                time.time_ns(),
                ERROR if error is not None else UNSET,
                self._service,
                span.attributes,
            )
            self._ended += b"\n"
            return
        if self.processor is None:
            return
        self.processor.on_end(
            ReadableSpan(
                self.name,
                context=span.context,
                parent=span.parent.context() if span.parent is not None else None,
                resource=self.provider.resource,
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
        ended, self._ended = self._ended, bytearray()
        if not ended or self.lines is None:
            return
        try:
            self.lines.append(bytes(ended))
        except (OSError, ValueError) as exc:  # a full disk, a closed file
            log.warning("spans not written", extra={"action": "spans_lost", "count": len(ended), "error": repr(exc)})
