"""A round's telemetry: one span per call, and the stage's call, round and dead-letter metrics.

A span carries the seeds' attributes (`span_attributes`); normalization, where every call ends,
also counts the seeds' invocation metrics (`call_metrics`), and validation and execution the facts
only they know (`stage_metrics`). All are counted once the round's outputs were delivered, from
what the round emitted: a round that fails and is decided again counts once.

Each call's span is a child of the trace the call carries (its `traceparent` field, or the
record's header); a call whose trace the agent did not sample keeps that traceparent and costs
no span. A span ends with the call's outcome (what the round emitted for it, `held` if nothing),
and is marked an error for UNKNOWN_ERROR and dead letters.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import cast

from toolgate.schemas.models import ExecutionResult, StageRecord, TaxonomyClass, ToolProposal
from toolgate.schemas.wire import field_of
from toolgate.telemetry.call_spans import CallSpans
from toolgate.telemetry.setup import meter
from toolgate.telemetry.traceparent import parent_of
from toolgate.topics.headers import CALL_ID, TRACEPARENT, header
from toolgate.workers.runtime.call_metrics import CallMetrics
from toolgate.workers.runtime.emit import Emit
from toolgate.workers.runtime.handler import Inbound, M
from toolgate.workers.runtime.passages import Passage
from toolgate.workers.runtime.span_attributes import closed, opened
from toolgate.workers.runtime.stage_metrics import CompensationMetrics, ValidationMetrics

FAILED_OUTCOMES = (TaxonomyClass.UNKNOWN_ERROR, Passage.DEAD_LETTERED)
# How normalization left a result it could not make the agent's observation of.
UNNORMALIZED = frozenset({TaxonomyClass.OBSERVATION_NORMALIZATION_FAIL, Passage.DEAD_LETTERED})


class RoundTelemetry:
    def __init__(self, stage: str) -> None:
        self.stage = stage
        m = meter()
        self._attrs = {"stage": stage}
        self._spans = CallSpans(f"toolgate.{stage}")
        self._calls = m.create_counter("toolgate.calls", description="calls a stage finished, by outcome")
        self._round_seconds = m.create_histogram("toolgate.round.duration", unit="s")
        self._round_size = m.create_histogram("toolgate.round.size", unit="{call}")
        self._dead = m.create_counter("toolgate.deadletters")
        # Every call ends at normalization: the seeds' invocation metrics are counted there.
        self._invocations = CallMetrics() if stage == "normalization" else None
        self._gates = ValidationMetrics() if stage == "validation" else None
        self._compensations = CompensationMetrics() if stage == "execution" else None

    def open_spans(self, calls: Sequence[Inbound[M]]) -> None:
        """One span per sampled call; every call gets the traceparent its outputs carry."""
        for call in calls:
            parent = field_of(call.model, "traceparent") or header(call.origin.headers, TRACEPARENT)
            remote = parent_of(parent)
            if remote is not None and not remote.sampled:
                call.traceparent = str(parent)
                continue
            call_id = call.call_id or (header(call.origin.headers, CALL_ID) or "")
            attributes = opened(self.stage, call.model, call_id)
            attributes["messaging.source.partition"] = call.origin.partition
            span = self._spans.open(remote, attributes)
            call.span = span
            call.traceparent = span.traceparent if span is not None else str(parent or "")

    def close_spans(self, calls: Sequence[Inbound[M]], out: Emit) -> None:
        """End each call's span with its outcome in `out`, and count the outcomes."""
        labels: Counter[str] = Counter()
        for call in calls:
            label = str(out.outcomes.get(call.call_id, Passage.HELD))  # plain text, for the exporters
            labels[label] += 1
            if call.span is not None:
                error = label if label in FAILED_OUTCOMES else None
                ended = closed(self.stage, label, call.model, call.span.attributes, out.keys.get(call.call_id))
                self._spans.end(call.span, ended, error)
        self._spans.flush()
        for label, count in labels.items():
            self._calls.add(count, {**self._attrs, "outcome": label})
        if self._invocations is not None:
            results: list[ExecutionResult] = [c.model for c in calls if isinstance(c.model, ExecutionResult)]
            unobserved = {r.call_id for r in results if out.outcomes.get(r.call_id) in UNNORMALIZED}
            self._invocations.record(results, unobserved)
        if self._gates is not None:
            self._gates.record(cast(Sequence[Inbound[ToolProposal]], calls), out)
        if self._compensations is not None:
            self._compensations.record(cast(Sequence[Inbound[StageRecord]], calls), out)

    def round_done(self, seconds: float, calls: int, dead_letters: int) -> None:
        if dead_letters:
            self._dead.add(dead_letters, self._attrs)
        self._round_seconds.record(seconds, self._attrs)
        self._round_size.record(calls, self._attrs)
