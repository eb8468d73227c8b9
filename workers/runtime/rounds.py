"""One round of a stage: decode, decide, produce, and only then let Faust ack.

The order is fixed: take up to N records or T ms from the stream; check the MAC of each
record from an internal topic before anything else (a record no toolgate stage wrote is
dead-lettered, audited and never decoded); decode each item on its own (an undecodable one is
dead-lettered with its original bytes); open one span per call,
a child of the trace the call carries; run the stage's batch decision (one round of
Postgres work for all calls); produce every output and wait for the broker's
acknowledgements; then return, so Faust acks the input records.

Failures: a transient one (Postgres restarting, broker unreachable) retries the round, since
its input is fine; any other exception falls back to deciding call by call, and a call that
still fails alone is answered UNKNOWN_ERROR (fail closed) and dead-lettered, and the others
go on. Nothing escapes: an exception leaving a Faust agent would ack the round anyway.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

from opentelemetry.trace import SpanKind, Status, StatusCode

from toolgate.faults import crash_point
from toolgate.integrity import Sealer
from toolgate.schemas.codec import DecodeError, codec
from toolgate.schemas.models import FieldError, PayloadKind, StageBatch, StageRecord, TaxonomyClass
from toolgate.schemas.wire import WireModel
from toolgate.taxonomy import Taxonomy
from toolgate.telemetry import meter, parent_context, parse_traceparent, traceparent_of, tracer
from toolgate.topics.catalog import Topics
from toolgate.topics.headers import CALL_ID, TRACEPARENT, Headers, as_pairs, header, header_int
from toolgate.workers.runtime.audit import AuditSink, Entry
from toolgate.workers.runtime.db import is_transient
from toolgate.workers.runtime.delivery import Delivery, Send
from toolgate.workers.runtime.emit import Emit, Origin
from toolgate.workers.runtime.results import reject

log = logging.getLogger("toolgate.round")

M = TypeVar("M", bound=WireModel)
ATTEMPTS_HEADER = "toolgate-attempts"
MAX_ATTEMPTS = 1_000_000


@dataclass
class Inbound(Generic[M]):
    """One call (or decision) as a stage sees it."""

    model: M
    raw: bytes
    origin: Origin
    span: Any = None
    traceparent: str = ""  # this stage's span: what outputs carry onward

    @property
    def call_id(self) -> str:
        return str(getattr(self.model, "call_id", "") or getattr(self.model, "approval_id", ""))


class Handler(Generic[M]):
    """A stage's decision over a batch of calls from its source topic."""

    stage: str
    source: str  # logical topic
    model: type[M]

    async def start(self) -> None:
        """Open what the handler needs (pools, sessions) before the first round."""

    async def handle(self, calls: list[Inbound[M]], out: Emit) -> None:
        raise NotImplementedError

    def on_failure(self, call: Inbound[M], error: str, out: Emit) -> None:
        """Answer one call that failed on its own: UNKNOWN_ERROR, fail closed."""
        model = call.model
        if isinstance(model, StageRecord):
            out.item(
                "results",
                model.home_partition,
                reject(
                    model,
                    Taxonomy.UNKNOWN_ERROR,
                    [
                        FieldError(
                            field=None,
                            code="internal_error",
                            message="the call failed inside toolgate; an operator has it",
                        )
                    ],
                    stage=self.stage,
                    traceparent=call.traceparent,
                    home_partition=model.home_partition,
                    now_ms=now_ms(),
                ),
            )

    def decode(self, value: bytes) -> M:
        """One record (or batch item) of the source topic; DecodeError if it is none."""
        return codec().decode(value, self.model)

    def on_undecodable(self, origin: Origin, value: bytes, out: Emit) -> None:
        """A record that does not decode: dead-letter it with its original bytes."""
        out.dead_letter(origin, value, TaxonomyClass.SYNTACTIC_PARSE_FAIL, "undecodable record")


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class RawRecord:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers = field(default_factory=list)


class Rounds(Generic[M]):
    def __init__(
        self,
        handler: Handler[M],
        topics: Topics,
        send: Send,
        batch_bytes: int,
        sealer: Sealer,
        audits: AuditSink,
    ) -> None:
        self.handler = handler
        self.topics = topics
        self.sealer = sealer
        self.audits = audits
        self.delivery = Delivery(handler.stage, topics, send, batch_bytes, sealer, self._backoff)
        self.internal = handler.source in ("validated", "authorized", "executable", "results")
        self.source_topic = topics.name(handler.source)
        m = meter()
        attrs = {"stage": handler.stage}
        self._attrs = attrs
        self._calls = m.create_counter("toolgate.calls", description="calls a stage finished, by outcome")
        self._round_seconds = m.create_histogram("toolgate.round.duration", unit="s")
        self._round_size = m.create_histogram("toolgate.round.size", unit="{call}")
        self._dead = m.create_counter("toolgate.deadletters")

    # --- decoding -------------------------------------------------------------------

    def decode(self, records: Sequence[RawRecord], out: Emit) -> list[Inbound[M]]:
        """The calls in these records. A record that cannot be read, whatever is wrong with it,
        is dead-lettered with its original bytes; it never stops the round."""
        calls: list[Inbound[M]] = []
        for rec in records:
            headers = as_pairs(rec.headers)
            origin = Origin(
                self.handler.source,
                rec.partition,
                rec.offset,
                rec.key,
                headers,
                PayloadKind.RECORD,
                header_int(headers, ATTEMPTS_HEADER, default=1, low=1, high=MAX_ATTEMPTS),
            )
            value = rec.value or b""
            try:
                calls += self._decode_record(rec, origin, value, out)
            except Exception as exc:  # nothing a record holds may stop a stage
                log.exception(
                    "unreadable record",
                    extra={"stage": self.handler.stage, "action": "dead_letter", "error": repr(exc)},
                )
                out.dead_letter(origin, value, TaxonomyClass.UNKNOWN_ERROR, f"unreadable record: {type(exc).__name__}")
        return calls

    def _decode_record(self, rec: RawRecord, origin: Origin, value: bytes, out: Emit) -> list[Inbound[M]]:
        if self.internal and not self.sealer.mac_ok(self.source_topic, value, rec.headers):
            self._forged(origin, value, out)
            return []
        if not self.internal:
            try:
                return [Inbound(self.handler.decode(value), value, origin)]
            except DecodeError as exc:
                log.warning(
                    "undecodable record",
                    extra={"stage": self.handler.stage, "action": "dead_letter", "error": str(exc)},
                )
                self.handler.on_undecodable(origin, value, out)
                return []
        try:
            batch = codec().decode(value, StageBatch)
        except DecodeError as exc:
            out.dead_letter(origin, value, TaxonomyClass.SYNTACTIC_PARSE_FAIL, f"undecodable StageBatch: {exc}")
            return []
        calls: list[Inbound[M]] = []
        for item in batch.items:
            item_origin = replace(origin, kind=PayloadKind.STAGE_ITEM)
            try:
                calls.append(Inbound(self.handler.decode(item), item, item_origin))
            except DecodeError as exc:
                out.dead_letter(
                    item_origin,
                    item,
                    TaxonomyClass.SYNTACTIC_PARSE_FAIL,
                    f"undecodable {self.handler.model.__name__}: {exc}",
                )
        return calls

    def _forged(self, origin: Origin, value: bytes, out: Emit) -> None:
        """A record on an internal topic whose MAC does not verify: no toolgate stage wrote it."""
        reason = f"the stage MAC of this {origin.topic} record does not verify: it was not written by a toolgate stage"
        log.warning("forged record", extra={"stage": self.handler.stage, "action": "dead_letter", "error": reason})
        out.dead_letter(origin, value, TaxonomyClass.SIGNATURE_MISMATCH, reason)
        call_id = header(origin.headers, CALL_ID)
        out.audits.append(
            Entry(
                self.handler.stage,
                "forged_record",
                "unknown",
                call_id,
                None,
                {"topic": origin.topic, "partition": origin.partition, "offset": origin.offset, "bytes": len(value)},
            )
        )

    # --- the round --------------------------------------------------------------------

    async def run(self, records: Sequence[RawRecord]) -> None:
        started = time.perf_counter()
        out = Emit(self.handler.stage)
        calls = self.decode(records, out)
        self._open_spans(calls)
        decided = await self._decide(calls)
        await self._audit([*out.audits, *decided.audits])
        for call_out in (out, decided):
            await self.delivery.flush(call_out)
        crash_point("stage.after_produce")
        self._close_spans(calls, decided)
        dead = len(out.dead_letters) + len(decided.dead_letters)
        if dead:
            self._dead.add(dead, self._attrs)
        self._round_seconds.record(time.perf_counter() - started, self._attrs)
        self._round_size.record(len(calls), self._attrs)

    async def _decide(self, calls: list[Inbound[M]]) -> Emit:
        if not calls:
            return Emit(self.handler.stage)
        attempt = 0
        while True:
            out = Emit(self.handler.stage)
            try:
                await self.handler.handle(calls, out)
                return out
            except Exception as exc:
                if is_transient(exc):
                    attempt += 1
                    await self._backoff(attempt, exc)
                    continue
                log.exception(
                    "round failed; deciding call by call",
                    extra={"stage": self.handler.stage, "action": "isolate", "count": len(calls)},
                )
                return await self._one_by_one(calls)

    async def _one_by_one(self, calls: list[Inbound[M]]) -> Emit:
        merged = Emit(self.handler.stage)
        for call in calls:
            attempt = 0
            while True:
                out = Emit(self.handler.stage)
                try:
                    await self.handler.handle([call], out)
                    break
                except Exception as exc:
                    if is_transient(exc):
                        attempt += 1
                        await self._backoff(attempt, exc)
                        continue
                    log.exception(
                        "call failed",
                        extra={"stage": self.handler.stage, "action": "fail_closed", "call_id": call.call_id},
                    )
                    out = Emit(self.handler.stage)
                    reason = f"{type(exc).__name__}: {exc}"
                    self.handler.on_failure(call, reason, out)
                    out.dead_letter(call.origin, call.raw, TaxonomyClass.UNKNOWN_ERROR, reason, call.call_id)
                    break
            _merge(merged, out)
        return merged

    async def _backoff(self, attempt: int, exc: BaseException) -> None:
        delay = min(10.0, 0.1 * 2 ** min(attempt, 10)) * (0.5 + random.random())
        log.warning(
            "transient failure, retrying the round",
            extra={"stage": self.handler.stage, "action": "retry", "error": repr(exc), "count": attempt},
        )
        await asyncio.sleep(delay)

    async def _audit(self, entries: list[Entry]) -> None:
        """Audit what the round refused outside a handler's transaction, before producing."""
        attempt = 0
        while entries:
            try:
                await self.audits.write(entries)
                return
            except Exception as exc:
                if not is_transient(exc):
                    log.exception("audit write failed", extra={"stage": self.handler.stage, "action": "audit_failed"})
                    return
                attempt += 1
                await self._backoff(attempt, exc)

    # --- telemetry ----------------------------------------------------------------------

    def _open_spans(self, calls: list[Inbound[M]]) -> None:
        """One span per call, a child of the trace it carries. A call whose trace the agent
        did not sample keeps its traceparent and costs no span."""
        t = tracer()
        for call in calls:
            parent = getattr(call.model, "traceparent", None) or header(call.origin.headers, TRACEPARENT)
            remote = parse_traceparent(parent)
            if remote is not None and not remote.trace_flags.sampled:
                call.traceparent = str(parent)
                continue
            span = t.start_span(
                f"toolgate.{self.handler.stage}",
                context=parent_context(remote) if remote is not None else None,
                kind=SpanKind.CONSUMER,
                attributes={
                    "toolgate.stage": self.handler.stage,
                    "tool.call_id": call.call_id or (header(call.origin.headers, CALL_ID) or ""),
                    "tool.name": str(getattr(call.model, "tool_name", "")),
                    "tool.version": str(getattr(call.model, "tool_version", "")),
                    "tenant.id": str(getattr(call.model, "tenant_id", "")),
                    "messaging.source.partition": call.origin.partition,
                },
            )
            call.span = span
            call.traceparent = traceparent_of(span)

    def _close_spans(self, calls: list[Inbound[M]], out: Emit) -> None:
        labels: Counter[str] = Counter()
        for call in calls:
            label = out.outcomes.get(call.call_id, "held")
            labels[label] += 1
            if call.span is None:
                continue
            call.span.set_attribute("toolgate.outcome", label)
            if label in ("UNKNOWN_ERROR", "dead_lettered"):
                call.span.set_status(Status(StatusCode.ERROR, label))
            call.span.end()
        for label, count in labels.items():
            self._calls.add(count, {**self._attrs, "outcome": label})


def _merge(into: Emit, other: Emit) -> None:
    for key, items in other.items.items():
        into.items.setdefault(key, []).extend(items)
    into.records.extend(other.records)
    into.dead_letters.extend(other.dead_letters)
    into.outcomes.update(other.outcomes)
    into.audits.extend(other.audits)
