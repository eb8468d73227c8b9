"""W3C traceparents: the parent span a record names, read strictly (a malformed or zero id is
no parent).
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState

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
