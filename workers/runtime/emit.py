"""What a round produces, collected before anything is sent.

A stage never writes to Kafka in the middle of its decision: it adds items, edge records and
dead letters to an `Emit`, and the runtime produces them all, waits for the broker's
acknowledgements, and only then stores the offsets of the round's input. Every record leaves sealed
(toolgate.trust.integrity): a MAC on internal topics and dead letters, the deployment's signature on a
tenant's edge topics.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from dataclasses import dataclass, field

from toolgate.schemas.codec import codec
from toolgate.schemas.models import (
    DeadLetter,
    ExecutionResult,
    Header,
    PayloadKind,
    StageBatch,
    StageRecord,
    TaxonomyClass,
)
from toolgate.schemas.wire import WireModel
from toolgate.scrubber import SCRUBBER
from toolgate.store.audit import Entry
from toolgate.topics.catalog import Topics
from toolgate.topics.headers import CALL_ID, SCHEMA, Address, Headers, header
from toolgate.topics.producers import Record
from toolgate.trust.integrity import Sealer
from toolgate.workers.runtime import results
from toolgate.workers.runtime.call_facts import GateFacts
from toolgate.workers.runtime.passages import Label, Passage
from toolgate.workers.runtime.refusals import Refusal

# A dead letter must be deliverable whatever it holds: what came in may already be at the
# broker's limit (1 MiB by default), so the original value is cut to fit when it must.
MAX_LETTER_BYTES = 900 * 1024
MAX_HEADER = 16 * 1024
MAX_CALL_ID = 128


@dataclass(frozen=True)
class Origin:
    """Where an input came from, for dead letters (the items of one batch share theirs)."""

    topic: str  # logical
    partition: int
    offset: int
    key: bytes | None
    headers: Headers
    kind: PayloadKind
    attempts: int = 1
    produced_at_ms: int | None = None  # its StageBatch's, for a record from an internal topic


@dataclass
class Emit:
    stage: str
    items: dict[tuple[str, int], list[bytes]] = field(default_factory=dict)
    records: list[Record] = field(default_factory=list)  # edge records, to physical topics
    dead_letters: list[DeadLetter] = field(default_factory=list)
    outcomes: dict[str, Label] = field(default_factory=dict)  # how the round left each call (passages.py)
    # What the round's telemetry records of its calls, by call_id (workers/runtime/call_facts.py):
    # the results that ended them, the idempotency keys of the calls it passed on, and
    # validation's findings.
    ended: dict[str, ExecutionResult] = field(default_factory=dict)
    keys: dict[str, str] = field(default_factory=dict)
    facts: dict[str, GateFacts] = field(default_factory=dict)
    audits: list[Entry] = field(default_factory=list)  # written before anything is produced
    # Records refused that prove nobody: audited collapsed into counts (refusals.py), with `audits`.
    refusals: list[Refusal] = field(default_factory=list)
    # Committed outbox rows these outputs publish (workers/runtime/outbox.py): marked sent once
    # the broker acknowledged them.
    outbox_ids: list[int] = field(default_factory=list)
    # (topic, partition) -> when the oldest item re-published to it was first produced (a relay
    # re-driving what a lost broker held): its batches keep that age visible.
    first_produced: dict[tuple[str, int], int] = field(default_factory=dict)

    def item(self, topic: str, partition: int, model: StageRecord | ExecutionResult) -> None:
        data = results.encoded(model) if isinstance(model, ExecutionResult) else codec().encode(model)
        self.items.setdefault((topic, partition), []).append(data)
        if isinstance(model, ExecutionResult):
            self.end(model)
        else:
            self.outcomes.setdefault(model.call.call_id, Passage.FORWARDED)
            self.keys[model.call.call_id] = model.call.idempotency_key

    def end(self, res: ExecutionResult) -> None:
        """`res` ends its call in this round (published here, or through the outbox)."""
        self.outcomes[res.call_id] = res.outcome.taxonomy_class
        self.ended[res.call_id] = res

    def raw_item(self, topic: str, partition: int, payload: bytes, first_produced_ms: int | None = None) -> None:
        self.items.setdefault((topic, partition), []).append(payload)
        if first_produced_ms is not None:
            at = self.first_produced.get((topic, partition), first_produced_ms)
            self.first_produced[(topic, partition)] = min(at, first_produced_ms)

    def record(self, topic: str, model: WireModel, address: Address, partition: int | None = None) -> None:
        """An edge record, to `topic` (a physical name: a tenant's own, for its observations)."""
        c = codec()
        headers = address.headers(c.fingerprint_of(type(model)))
        self.records.append(Record(topic, address.key.encode(), c.encode(model), headers, partition))

    def dead_letter(
        self,
        origin: Origin,
        value: bytes,
        taxonomy: TaxonomyClass,
        reason: str,
        call_id: str | None = None,
    ) -> None:
        call_id = call_id or header(origin.headers, CALL_ID)
        if call_id is not None and len(call_id) > MAX_CALL_ID:
            call_id = None
        headers = [Header(key=k[:MAX_HEADER], value=SCRUBBER.bytes(v)[:MAX_HEADER]) for k, v in origin.headers[:64]]
        value = SCRUBBER.bytes(value)
        key = origin.key[:MAX_HEADER] if origin.key is not None else None
        room = MAX_LETTER_BYTES - len(key or b"") - sum(len(h.key) + len(h.value or b"") for h in headers)
        if len(value) > room:  # it came in at the broker's limit: a letter must still go out
            reason += f" (value truncated from {len(value)} bytes, sha256 {hashlib.sha256(value).hexdigest()})"
            value = value[: max(room, 0)]
        self.dead_letters.append(
            DeadLetter(
                dead_letter_id=str(uuid.uuid4()),
                call_id=call_id,
                stage=self.stage,
                source_topic=origin.topic,
                source_partition=origin.partition,
                source_offset=origin.offset,
                payload_kind=origin.kind,
                key=key,
                value=value,
                headers=headers,
                taxonomy_class=taxonomy,
                reason=SCRUBBER.text(reason)[:2000],
                attempts=origin.attempts,
                dead_lettered_at_ms=int(time.time() * 1000),
                produced_at_ms=origin.produced_at_ms,
            )
        )
        if call_id:
            self.outcomes.setdefault(call_id, Passage.DEAD_LETTERED)

    def batches(self, max_bytes: int) -> list[tuple[str, int, bytes, Headers]]:
        """The collected items as StageBatch records, split to stay under `max_bytes`, each
        stamped with when it was produced (now: workers/runtime/freshness.py)."""
        c = codec()
        fingerprint = c.fingerprint_of(StageBatch).hex().encode()
        now = int(time.time() * 1000)
        out: list[tuple[str, int, bytes, Headers]] = []
        for (topic, partition), items in self.items.items():
            first = min(self.first_produced.get((topic, partition), now), now)
            chunk: list[bytes] = []
            size = 0
            for item in items:
                if chunk and size + len(item) > max_bytes:
                    out.append(self._batch(topic, partition, chunk, fingerprint, (now, first)))
                    chunk, size = [], 0
                chunk.append(item)
                size += len(item)
            if chunk:
                out.append(self._batch(topic, partition, chunk, fingerprint, (now, first)))
        return out

    def _batch(
        self, topic: str, partition: int, items: list[bytes], fingerprint: bytes, produced: tuple[int, int]
    ) -> tuple[str, int, bytes, Headers]:
        batch = StageBatch(
            stage=self.stage,
            source_partition=partition,
            items=items,
            produced_at_ms=produced[0],
            first_produced_at_ms=produced[1],
        )
        return topic, partition, codec().encode(batch), [(SCHEMA, fingerprint), ("toolgate-stage", self.stage.encode())]

    def messages(self, topics: Topics, max_bytes: int, sealer: Sealer, physical: bool = False) -> list[Record]:
        """Everything collected, sealed, as Kafka records addressed to physical topics (with
        `physical`, the items already name theirs: outbox rows)."""
        pending = [Record(t if physical else topics.name(t), None, v, h, p) for t, p, v, h in self.batches(max_bytes)]
        pending += self.records
        c = codec()
        for letter in self.dead_letters:
            key = letter.call_id.encode() if letter.call_id else None
            pending.append(Record(topics.name("deadletter"), key, c.encode(letter), []))
        sealed = sealer.seal_all([(r.topic, r.key, r.value, r.headers) for r in pending])
        return [Record(r.topic, r.key, r.value, h, r.partition) for r, h in zip(pending, sealed, strict=True)]

    def merge(self, other: Emit) -> None:
        """Add everything `other` collected to this one."""
        for key, items in other.items.items():
            self.items.setdefault(key, []).extend(items)
        self.records.extend(other.records)
        self.dead_letters.extend(other.dead_letters)
        self.outcomes.update(other.outcomes)
        self.ended.update(other.ended)
        self.keys.update(other.keys)
        self.facts.update(other.facts)
        self.audits.extend(other.audits)
        self.refusals.extend(other.refusals)
        self.outbox_ids.extend(other.outbox_ids)
        for at, first in other.first_produced.items():
            self.first_produced[at] = min(self.first_produced.get(at, first), first)

    def __len__(self) -> int:
        return sum(len(v) for v in self.items.values()) + len(self.records) + len(self.dead_letters)
