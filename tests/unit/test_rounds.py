"""`Rounds` with small hand-written handlers: no broker, no Postgres.

The round's collaborators are fakes of the three callables it is given: a broker that records
what is sent and acknowledges it, an audit writer that keeps entries, and a sleep that only
records the pauses. Inputs are StageBatches sealed exactly as a stage seals them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from typing import Any

import psycopg
import pytest

from tests.unit.factories import contracts, stage_record
from toolgate.schemas.codec import codec
from toolgate.schemas.models import DeadLetter, ExecutionResult, StageBatch, StageRecord, TaxonomyClass
from toolgate.store.audit import Entry
from toolgate.topics.catalog import Topics
from toolgate.topics.consumed import Consumed, Read
from toolgate.topics.producers import Record
from toolgate.trust.integrity import MAC_HEADER, DeploymentKeys, Sealer
from toolgate.workers.runtime.emit import Emit
from toolgate.workers.runtime.freshness import Bound
from toolgate.workers.runtime.handler import Handler, Inbound
from toolgate.workers.runtime.rounds import Rounds

TOPICS = Topics("unit.")
VALIDATED = TOPICS.name("validated")  # the topic the rounds below read
SEALER = Sealer(DeploymentKeys(b"a deployment secret of some length"), TOPICS)
BATCH_BYTES = 512 * 1024


class Broker:
    """Acknowledges every send at once and keeps what was sent."""

    def __init__(self) -> None:
        self.sent: list[Record] = []

    async def send(self, record: Record) -> Awaitable[Any]:
        self.sent.append(record)
        ack: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        ack.set_result(None)
        return ack

    def on(self, logical: str) -> list[Record]:
        return [m for m in self.sent if m.topic == TOPICS.name(logical)]

    def items(self, logical: str) -> list[bytes]:
        return [item for m in self.on(logical) for item in codec().decode(m.value, StageBatch).items]

    def dead_letters(self) -> list[DeadLetter]:
        return [codec().decode(m.value, DeadLetter) for m in self.on("deadletter")]


class AuditLog:
    """An audit writer that fails transiently `failures` times before it takes entries."""

    def __init__(self, failures: int = 0) -> None:
        self.entries: list[Entry] = []
        self.failures = failures

    async def write(self, entries: list[Entry]) -> None:
        if self.failures:
            self.failures -= 1
            raise psycopg.OperationalError("the audit database is restarting")
        self.entries.extend(entries)


class Forward(Handler[StageRecord]):
    """Policy-like: passes each call on to `authorized` and audits it; `bad` calls raise a
    permanent error, and the first `transient` batches fail as Postgres restarting would."""

    stage = "unit-stage"
    source = "validated"
    model = StageRecord

    def __init__(self, bad: frozenset[str] = frozenset(), transient: int = 0) -> None:
        self.bad = bad
        self.transient = transient
        self.batches: list[list[str]] = []

    async def handle(self, calls: list[Inbound[StageRecord]], out: Emit) -> None:
        self.batches.append([c.call_id for c in calls])
        if self.transient:
            self.transient -= 1
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        for call in calls:
            if call.call_id in self.bad:
                raise ValueError(f"cannot decide {call.call_id}")
            out.item("authorized", call.model.call.home_partition, call.model)
            out.audits.append(Entry(self.stage, "forwarded", "unit", call.call_id, call.model.call.tenant_id))


class Setup:
    def __init__(self, handler: Forward, audit: AuditLog | None = None) -> None:
        self.handler = handler
        self.broker = Broker()
        self.audit = audit or AuditLog()
        self.slept: list[float] = []
        ticks = iter(range(1_000_000))
        self.rounds = Rounds(
            handler,
            TOPICS,
            self.broker.send,
            BATCH_BYTES,
            SEALER,
            self.audit.write,
            Bound(max_age_ms=900_000, future_ms=60_000),
            clock=lambda: float(next(ticks)),
            sleep=self.sleep,
        )

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)

    def run(self, records: list[Read]) -> None:
        asyncio.run(self.rounds.run(records))


def record(call_id: str) -> StageRecord:
    return stage_record(contracts()[0], call_id=call_id)


def batch(*items: bytes, offset: int = 0) -> Consumed:
    """One sealed StageBatch record of `validated`, as a stage produces it."""
    out = Emit("validation")
    for item in items:
        out.raw_item("validated", 0, item)
    (msg,) = out.messages(TOPICS, BATCH_BYTES, SEALER)
    return Consumed(VALIDATED, 0, offset, msg.key, msg.value, msg.headers)


def calls(*call_ids: str, offset: int = 0) -> Consumed:
    return batch(*(codec().encode(record(c)) for c in call_ids), offset=offset)


def forwarded(setup: Setup) -> list[str]:
    return [codec().decode(item, StageRecord).call.call_id for item in setup.broker.items("authorized")]


def test_a_round_that_succeeds_forwards_every_call_and_audits_it() -> None:
    setup = Setup(Forward())
    setup.run([calls("c1", "c2"), calls("c3", offset=1)])
    assert setup.handler.batches == [["c1", "c2", "c3"]]
    assert forwarded(setup) == ["c1", "c2", "c3"]
    assert [(e.action, e.call_id) for e in setup.audit.entries] == [("forwarded", c) for c in ("c1", "c2", "c3")]
    assert setup.broker.on("deadletter") == [] and setup.slept == []
    # what leaves is sealed for the topic it goes to
    (out,) = setup.broker.on("authorized")
    assert SEALER.mac_ok(out.topic, out.value, out.headers)


def test_a_transient_failure_retries_the_whole_round() -> None:
    setup = Setup(Forward(transient=2))
    setup.run([calls("c1", "c2")])
    assert setup.handler.batches == [["c1", "c2"]] * 3
    assert forwarded(setup) == ["c1", "c2"]
    assert len(setup.slept) == 2 and 0.1 <= setup.slept[0] < 0.3 and 0.2 <= setup.slept[1] < 0.6
    assert setup.broker.on("deadletter") == []


def test_a_permanent_failure_falls_back_to_one_by_one_and_only_the_bad_call_fails() -> None:
    setup = Setup(Forward(bad=frozenset({"c2"})))
    setup.run([calls("c1", "c2", "c3")])
    assert setup.handler.batches == [["c1", "c2", "c3"], ["c1"], ["c2"], ["c3"]]
    assert forwarded(setup) == ["c1", "c3"]
    # on_failure answered the bad call: UNKNOWN_ERROR, fail closed, on `results`
    (answer,) = [codec().decode(item, ExecutionResult) for item in setup.broker.items("results")]
    assert answer.call_id == "c2" and answer.outcome.taxonomy_class is TaxonomyClass.UNKNOWN_ERROR
    # and it is dead-lettered with its original bytes
    (letter,) = setup.broker.dead_letters()
    assert letter.call_id == "c2" and letter.taxonomy_class is TaxonomyClass.UNKNOWN_ERROR
    assert letter.value == codec().encode(record("c2"))
    assert "ValueError: cannot decide c2" in letter.reason
    assert [e.call_id for e in setup.audit.entries] == ["c1", "c3"]


class FlakyAlone(Forward):
    """Fails `c1` alone once, transiently, after the batch failed for `bad`."""

    failed_alone = False

    async def handle(self, calls: list[Inbound[StageRecord]], out: Emit) -> None:
        if [c.call_id for c in calls] == ["c1"] and not self.failed_alone:
            self.failed_alone = True
            raise psycopg.OperationalError("restarting")
        await super().handle(calls, out)


def test_a_transient_failure_of_one_call_alone_is_retried_before_it_is_given_up() -> None:
    setup = Setup(FlakyAlone(bad=frozenset({"c2"})))
    setup.run([calls("c1", "c2")])
    assert setup.handler.batches == [["c1", "c2"], ["c1"], ["c2"]]
    assert forwarded(setup) == ["c1"] and len(setup.slept) == 1
    assert [letter.call_id for letter in setup.broker.dead_letters()] == ["c2"]


def test_an_undecodable_item_is_dead_lettered_with_its_bytes_and_the_rest_go_on() -> None:
    garbage = b"\x00\x01 not a StageRecord"
    setup = Setup(Forward())
    setup.run([batch(codec().encode(record("c1")), garbage)])
    assert forwarded(setup) == ["c1"]
    (letter,) = setup.broker.dead_letters()
    assert letter.value == garbage and letter.taxonomy_class is TaxonomyClass.SYNTACTIC_PARSE_FAIL
    assert letter.source_topic == "validated" and letter.source_offset == 0


def test_an_undecodable_batch_is_dead_lettered_whole() -> None:
    value = b"sealed, but no StageBatch"
    headers = SEALER.seal(TOPICS.name("validated"), None, value, [])
    setup = Setup(Forward())
    setup.run([Consumed(VALIDATED, 0, 7, None, value, headers)])
    assert setup.handler.batches == []
    (letter,) = setup.broker.dead_letters()
    assert letter.value == value and letter.taxonomy_class is TaxonomyClass.SYNTACTIC_PARSE_FAIL
    assert letter.source_offset == 7


@pytest.mark.parametrize("tamper", ["value", "mac", "no mac"])
def test_a_forged_record_is_dead_lettered_audited_and_never_decoded(tamper: str) -> None:
    good = calls("c1")
    headers = [(k, v) for k, v in good.headers if tamper != "no mac" or k != MAC_HEADER]
    if tamper == "mac":
        headers = [(k, b"\x00" * len(v) if k == MAC_HEADER else v) for k, v in headers]
    value = (good.value or b"") + (b"x" if tamper == "value" else b"")
    setup = Setup(Forward())
    setup.run([Consumed(VALIDATED, 0, 3, None, value, headers), calls("c2", offset=4)])
    assert setup.handler.batches == [["c2"]]
    (letter,) = setup.broker.dead_letters()
    assert letter.value == value and letter.taxonomy_class is TaxonomyClass.SIGNATURE_MISMATCH
    forged = [e for e in setup.audit.entries if e.action == "forged_record"]
    assert [(e.stage, e.actor, e.detail["offset"], e.detail["bytes"]) for e in forged] == [
        ("unit-stage", "unknown", 3, len(value))
    ]


def test_audit_writes_are_retried_while_transient() -> None:
    setup = Setup(Forward(), AuditLog(failures=2))
    setup.run([calls("c1")])
    assert [e.call_id for e in setup.audit.entries] == ["c1"]
    assert len(setup.slept) == 2 and forwarded(setup) == ["c1"]


def test_an_empty_round_decides_nothing_and_sends_nothing() -> None:
    setup = Setup(Forward())
    setup.run([])
    assert setup.handler.batches == [] and setup.broker.sent == [] and setup.audit.entries == []


def stamped(produced_at_ms: int, *call_ids: str, offset: int = 0) -> Consumed:
    """A genuine, sealed batch that says it was produced at `produced_at_ms`."""
    items = [codec().encode(record(c)) for c in call_ids]
    value = codec().encode(
        StageBatch(
            stage="validation",
            source_partition=0,
            items=items,
            produced_at_ms=produced_at_ms,
            first_produced_at_ms=produced_at_ms,
        )
    )
    return Consumed(VALIDATED, 0, offset, None, value, SEALER.seal(TOPICS.name("validated"), None, value, []))


@pytest.mark.parametrize("age_s", [3600, 86_400, -3600])
def test_a_genuine_record_past_the_freshness_bound_is_dead_lettered_audited_and_never_decoded(age_s: int) -> None:
    now = int(time.time() * 1000)
    old = [stamped(now - age_s * 1000, "c1", offset=5), stamped(now - age_s * 1000, "c2", offset=6)]
    setup = Setup(Forward())
    setup.run([*old, stamped(now, "c3", offset=7)])
    assert setup.handler.batches == [["c3"]]
    letters = setup.broker.dead_letters()
    assert [(letter.source_offset, letter.taxonomy_class) for letter in letters] == [
        (5, TaxonomyClass.STALE_STATE),
        (6, TaxonomyClass.STALE_STATE),
    ]
    assert letters[0].value == old[0].value and letters[0].produced_at_ms == now - age_s * 1000
    # the round's stale records are one audit entry, however many
    (entry,) = [e for e in setup.audit.entries if e.action == "stale_records"]
    assert entry.detail["count"] == 2 and entry.detail["first"] == {"partition": 0, "offset": 5}


def test_a_record_of_a_release_without_a_production_time_is_stale() -> None:
    setup = Setup(Forward())
    setup.run([stamped(0, "c1")])
    assert setup.handler.batches == []
    (letter,) = setup.broker.dead_letters()
    assert letter.taxonomy_class is TaxonomyClass.STALE_STATE


def test_what_a_stage_produces_says_when_and_items_of_a_dead_letter_carry_it() -> None:
    before = int(time.time() * 1000)
    setup = Setup(Forward(bad=frozenset({"c2"})))
    setup.run([calls("c1", "c2")])
    (out,) = setup.broker.on("authorized")
    produced = codec().decode(out.value, StageBatch)
    assert before <= produced.produced_at_ms == produced.first_produced_at_ms <= int(time.time() * 1000)
    (letter,) = setup.broker.dead_letters()  # the bad call's: it keeps its batch's time
    assert letter.produced_at_ms is not None and before <= letter.produced_at_ms
