"""Reading a round's records: verify, decode, and dead-letter whatever cannot be read.

A record from an internal topic (a `StageBatch` another stage wrote) must carry a stage MAC
that verifies before anything else is done with it: one that does not was written by no toolgate
stage, and is dead-lettered (SIGNATURE_MISMATCH) and audited, never decoded. A genuine batch must
also be fresh (freshness.py): one produced longer ago than the bound is a replay, or a backlog
older than the bound, and is dead-lettered (STALE_STATE) and audited, its calls never read. Each
record, and each item of a batch, is decoded on its own; one that does not decode is
dead-lettered with its original bytes (SYNTACTIC_PARSE_FAIL), and anything else wrong with a
record (UNKNOWN_ERROR) never stops the round. A record whose headers could not be read
(topics/consumed.py) is dead-lettered with its key and value and no headers
(SYNTACTIC_PARSE_FAIL). What proves nobody is audited collapsed into counts, every value from the
record bounded (refusals.py).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import Generic

from toolgate.schemas.codec import DecodeError, codec
from toolgate.schemas.models import PayloadKind, StageBatch, TaxonomyClass
from toolgate.store.audit import Entry
from toolgate.store.audit_entry import bounded
from toolgate.topics.consumed import MAX_REASON, Consumed, Read, Unreadable
from toolgate.topics.headers import CALL_ID, as_pairs, header, header_int
from toolgate.trust.integrity import Sealer
from toolgate.workers.runtime.clock import now_ms
from toolgate.workers.runtime.emit import Emit, Origin
from toolgate.workers.runtime.freshness import Bound, stale
from toolgate.workers.runtime.handler import Handler, Inbound, M
from toolgate.workers.runtime.refusals import Refusal

log = logging.getLogger("toolgate.round")

ATTEMPTS_HEADER = "toolgate-attempts"
MAX_ATTEMPTS = 1_000_000
INTERNAL_SOURCES = ("validated", "authorized", "executable", "results")


class Intake(Generic[M]):
    """The calls in a round's records, for one handler reading `source_topic` (physical)."""

    def __init__(self, handler: Handler[M], source_topic: str, sealer: Sealer, bound: Bound) -> None:
        self.handler = handler
        self.source_topic = source_topic
        self.sealer = sealer
        self.bound = bound
        self.internal = handler.source in INTERNAL_SOURCES
        self._stale: list[tuple[Origin, int]] = []  # this round's stale records, audited together

    def decode(self, records: Sequence[Read], out: Emit) -> list[Inbound[M]]:
        """The calls in these records. A record that cannot be read, whatever is wrong with it,
        is dead-lettered with its original bytes; it never stops the round."""
        calls: list[Inbound[M]] = []
        self._stale = []
        now = now_ms()
        for rec in records:
            headers = as_pairs(rec.headers) if isinstance(rec, Consumed) else []
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
                calls += self._decode_record(rec, origin, value, out, now)
            except Exception as exc:  # nothing a record holds may stop a stage
                log.exception(
                    "unreadable record",
                    extra={"stage": self.handler.stage, "action": "dead_letter", "error": repr(exc)},
                )
                out.dead_letter(origin, value, TaxonomyClass.UNKNOWN_ERROR, f"unreadable record: {type(exc).__name__}")
        if self._stale:  # a replay of genuine records in bulk floods no more than refusals do
            out.refusals.append(Refusal(self._stale_entry(now), self._stale[0][0].topic))
        return calls

    def _decode_record(self, rec: Read, origin: Origin, value: bytes, out: Emit, now: int) -> list[Inbound[M]]:
        if isinstance(rec, Unreadable):
            self._unreadable(origin, value, rec.reason, out)
            return []
        if self.internal and not self.sealer.mac_ok(self.source_topic, value, origin.headers):
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
        return self._decode_batch(origin, value, out, now)

    def _decode_batch(self, origin: Origin, value: bytes, out: Emit, now: int) -> list[Inbound[M]]:
        try:
            batch = codec().decode(value, StageBatch)
        except DecodeError as exc:
            out.dead_letter(origin, value, TaxonomyClass.SYNTACTIC_PARSE_FAIL, f"undecodable StageBatch: {exc}")
            return []
        origin = replace(origin, produced_at_ms=batch.produced_at_ms)
        too_old = stale(batch.produced_at_ms, now, self.bound)
        if too_old is not None:
            log.warning("stale record", extra={"stage": self.handler.stage, "action": "dead_letter", "error": too_old})
            out.dead_letter(origin, value, TaxonomyClass.STALE_STATE, f"stale {origin.topic} record: {too_old}")
            self._stale.append((origin, batch.produced_at_ms))
            return []
        calls: list[Inbound[M]] = []
        item_origin = replace(origin, kind=PayloadKind.STAGE_ITEM)  # the batch's items share it
        for item in batch.items:
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

    def _stale_entry(self, now: int) -> Entry:
        """One audit entry for a round's stale records, however many: where they were and how
        old the oldest was (refusals.py collapses a window's entries past the first few)."""
        first, _ = self._stale[0]
        oldest = min(produced for _, produced in self._stale)
        detail = {
            "topic": first.topic,
            "count": len(self._stale),
            "first": {"partition": first.partition, "offset": first.offset},
            "oldest_age_s": (now - oldest) // 1000 if oldest > 0 else None,
            "max_age_s": self.bound.max_age_ms // 1000,
        }
        return Entry(self.handler.stage, "stale_records", "unknown", None, None, detail)

    def _forged(self, origin: Origin, value: bytes, out: Emit) -> None:
        """A record on an internal topic whose MAC does not verify: no toolgate stage wrote it."""
        reason = f"the stage MAC of this {origin.topic} record does not verify: it was not written by a toolgate stage"
        log.warning("forged record", extra={"stage": self.handler.stage, "action": "dead_letter", "error": reason})
        out.dead_letter(origin, value, TaxonomyClass.SIGNATURE_MISMATCH, reason)
        call_id = bounded(header(origin.headers, CALL_ID))
        where = {"topic": origin.topic, "partition": origin.partition, "offset": origin.offset, "bytes": len(value)}
        entry = Entry(self.handler.stage, "forged_record", "unknown", call_id, None, where)
        out.refusals.append(Refusal(entry, origin.topic))

    def _unreadable(self, origin: Origin, value: bytes, why: str, out: Emit) -> None:
        """A record whose headers could not be read: its key and value go to the dead-letter topic
        (its headers cannot); it proves nobody, since its signature or MAC travelled in them."""
        reason = f"this {origin.topic} record's headers cannot be read, so it is dead-lettered with its key and value"
        log.warning("unreadable record", extra={"stage": self.handler.stage, "action": "dead_letter", "error": why})
        out.dead_letter(origin, value, TaxonomyClass.SYNTACTIC_PARSE_FAIL, f"{reason}: {why}")
        detail = {
            "code": "unreadable_headers",
            "topic": origin.topic,
            "partition": origin.partition,
            "offset": origin.offset,
            "bytes": len(value),
            "error": bounded(why, MAX_REASON),
        }
        out.refusals.append(
            Refusal(Entry(self.handler.stage, "unreadable_record", "unknown", None, None, detail), origin.topic)
        )
