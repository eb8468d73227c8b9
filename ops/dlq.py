"""Operator commands for the dead-letter topic: list, show, replay, discard.

The letters live on tool.deadletter; what operators did with them lives in
`toolgate.dead_letter_actions` and the audit log. The topic is read to its end by consuming it
(never by trusting high watermarks, which Tansu under-reports). Every letter a toolgate stage
wrote carries its stage MAC; a letter without a valid one, or whose headers cannot be read (its
MAC is in them), is shown as forged and is never replayed (the refusal is audited, with what the
letter says bounded). A replay republishes the original bytes to the topic they
came from with their key and headers, sealed again for that topic, so the call keeps its
identity and idempotency key: replaying twice never executes twice, and whatever is replayed
meets every check a first delivery meets. A MAC is checked with the deployment key it names, if
that key is accepted now (toolgate.trust.integrity), and a replay is sealed with the key that seals now:
a letter sealed before a rotation of the deployment secret can be replayed until its key is
retired, and shows as forged after.

That includes freshness (workers/runtime/freshness.py): a record of an internal topic keeps the
time it was first produced, so one older than the bound is refused by the stage it goes back to,
and `replay` refuses it first, saying so. Only `--allow-stale` sends it on: stamped anew, with
its original age kept in the batch's `first_produced_at_ms` and in the audit log.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid
from dataclasses import dataclass
from typing import Any

import psycopg
from confluent_kafka import OFFSET_BEGINNING, Consumer

from toolgate.client import ToolgateClient
from toolgate.kafka_security import OPERATOR, client_config
from toolgate.schemas.codec import DecodeError, codec
from toolgate.schemas.models import DeadLetter, PayloadKind, StageBatch
from toolgate.settings import Settings
from toolgate.store import audit, dead_letters
from toolgate.store.audit_entry import bounded
from toolgate.store.dead_letters import Acted
from toolgate.topics import consumed
from toolgate.topics.catalog import Topics
from toolgate.topics.ends import READER_SETTINGS, ToEnd
from toolgate.topics.headers import REPLAY_OF, SCHEMA
from toolgate.trust.integrity import MACED, Sealer, deployment_keys
from toolgate.workers.runtime.clock import now_ms
from toolgate.workers.runtime.freshness import Bound, stale
from toolgate.workers.runtime.intake import ATTEMPTS_HEADER, INTERNAL_SOURCES

STAGE = "operator"
# The topics stages consume: the only places a replay may go.
CONSUMED = frozenset({"proposals", "validated", "authorized", "approvals_decisions", "executable", "results"})
# The states of letters no operator has handled yet: `dlq list` shows them, `status` counts them.
UNHANDLED = ("open", "forged")
READ_LIMIT_S = 10.0  # how long a reading of the topic waits for every partition's end


class DeadLettersUnread(RuntimeError):
    """The dead-letter topic could not be read to its end."""


@dataclass(frozen=True)
class Letter:
    letter: DeadLetter
    genuine: bool  # its stage MAC verifies: a toolgate stage wrote it
    unreadable: str | None = None  # why its headers could not be read (then it is not genuine)


def read_all(settings: Settings, limit_s: float = READ_LIMIT_S) -> list[Letter]:
    """Every letter on the topic, each with whether its stage MAC verifies, read to the topic's
    end (topics/ends.py). A record that is no DeadLetter is skipped; a letter whose headers cannot
    be read (topics/consumed.py) is listed, as forged: its MAC, which travels in them, cannot be
    checked. A partition whose end the broker does not tell within `limit_s` is an error: a
    listing short of letters is not given as the whole."""
    topic = Topics(settings.topic_prefix).deadletter
    sealer = Sealer(deployment_keys(settings), Topics(settings.topic_prefix))
    config = {**client_config(settings, OPERATOR), "bootstrap.servers": settings.kafka_bootstrap}
    consumer = Consumer({**config, **READER_SETTINGS, "group.id": f"toolgate-dlq-{uuid.uuid4().hex[:8]}"})
    try:
        partitions = sorted(consumer.list_topics(topic, timeout=10.0).topics[topic].partitions)
        reading = ToEnd(consumer, dict.fromkeys(((topic, p) for p in partitions), OFFSET_BEGINNING), limit_s)
        letters = [found for record in reading if (found := read_letter(record, sealer, topic)) is not None]
    finally:
        consumer.close()
    if reading.short:
        short = ", ".join(f"{t}[{p}]" for t, p in reading.short)
        raise DeadLettersUnread(f"the broker did not say where {short} ends within {limit_s:g} s")
    return letters


def read_letter(record: consumed.Consumed | consumed.Unreadable, sealer: Sealer, topic: str) -> Letter | None:
    value = record.value or b""
    try:
        letter = codec().decode(value, DeadLetter)
    except DecodeError:
        return None
    if isinstance(record, consumed.Unreadable):
        return Letter(letter, False, record.reason)
    return Letter(letter, sealer.mac_ok(topic, value, record.headers))


def actions(settings: Settings, conn: psycopg.Connection[Any] | None = None) -> dict[str, Acted]:
    """What operators did with each letter, by its id; on `conn` (kept by the gauges) or a
    connection of its own."""
    if conn is None:
        with psycopg.connect(settings.database_url) as own:
            return dead_letters.actions(own)
    return dead_letters.actions(conn)


def state(genuine: bool, acted: Acted | None) -> str:
    """A letter's state: what an operator did with it, else open (a genuine one) or forged."""
    return acted.action if acted else ("open" if genuine else "forged")


def summary(found: Letter, acted: Acted | None) -> dict[str, Any]:
    letter = found.letter
    return {
        "dead_letter_id": letter.dead_letter_id,
        "call_id": letter.call_id,
        "stage": letter.stage,
        "source": f"{letter.source_topic}[{letter.source_partition}]@{letter.source_offset}",
        "kind": str(letter.payload_kind),
        "taxonomy_class": str(letter.taxonomy_class),
        "reason": letter.reason,
        "attempts": letter.attempts,
        "at": dt.datetime.fromtimestamp(letter.dead_lettered_at_ms / 1000, dt.UTC).isoformat(timespec="seconds"),
        "state": state(found.genuine, acted),
        "genuine": found.genuine,
        "bytes": len(letter.value),
        **({"unreadable": found.unreadable} if found.unreadable else {}),
    }


def listed(settings: Settings, everything: bool = False) -> list[dict[str, Any]]:
    """The letters `toolgate dlq list` shows: the open and the forged ones (every one when
    `everything`), each as `summary` has it."""
    states = actions(settings)
    rows = [summary(found, states.get(found.letter.dead_letter_id)) for found in read_all(settings)]
    return [r for r in rows if everything or r["state"] in UNHANDLED]


def find(settings: Settings, dead_letter_id: str) -> Letter:
    for found in read_all(settings):
        if found.letter.dead_letter_id == dead_letter_id:
            return found
    raise SystemExit(f"no dead letter {dead_letter_id} on {Topics(settings.topic_prefix).deadletter}")


async def _audited(settings: Settings, letter: DeadLetter, action: str, actor: str, note: str | None) -> None:
    # The letter may be forged: what it says is audited only within bounds.
    detail = {
        "dead_letter_id": bounded(letter.dead_letter_id),
        "source": bounded(letter.source_topic),
        "note": note,
    }
    entry = audit.Entry(STAGE, f"dead_letter_{action}", actor, bounded(letter.call_id), None, detail)
    async with await psycopg.AsyncConnection.connect(settings.database_url) as conn, conn.transaction():
        if action in ("replayed", "discarded"):
            await dead_letters.record(conn, letter.dead_letter_id, Acted(action, actor), note)
        await audit.append(conn, [entry])


def _record(settings: Settings, letter: DeadLetter, action: str, actor: str, note: str | None = None) -> None:
    asyncio.run(_audited(settings, letter, action, actor, note))


def replay(settings: Settings, dead_letter_id: str, actor: str, allow_stale: bool = False) -> dict[str, Any]:
    found = find(settings, dead_letter_id)
    letter = found.letter
    topics = Topics(settings.topic_prefix)
    sealer = Sealer(deployment_keys(settings), topics)
    refusal = _unreplayable(found, sealer, topics)
    fresh = refusal or _fresh_value(letter, now_ms(), Bound.of(settings), allow_stale)
    if isinstance(fresh, str):
        _record(settings, letter, "replay_refused", actor, fresh)
        raise SystemExit(f"dead letter {dead_letter_id}: {fresh}. Not replayed.")
    value, note = fresh
    target = topics.name(letter.source_topic)
    headers = [(h.key, h.value or b"") for h in letter.headers if h.key not in (ATTEMPTS_HEADER, REPLAY_OF)]
    headers += [(ATTEMPTS_HEADER, str(letter.attempts + 1).encode()), (REPLAY_OF, letter.dead_letter_id.encode())]
    if value != letter.value:  # a batch made anew: its own fingerprint
        fingerprint = codec().fingerprint_of(StageBatch).hex().encode()
        headers = [(SCHEMA, fingerprint), *((k, v) for k, v in headers if k != SCHEMA)]
    partition = (
        letter.source_partition if (letter.payload_kind is PayloadKind.STAGE_ITEM or letter.key is None) else None
    )
    client = ToolgateClient.from_settings(settings, client_id="toolgate-dlq", role=OPERATOR)
    client.publish_raw(target, letter.key, value, sealer.seal(target, letter.key, value, headers), partition)
    client.flush()
    _record(settings, letter, "replayed", actor, note)
    return {"dead_letter_id": dead_letter_id, "replayed_to": target, "partition": partition, "call_id": letter.call_id}


def _fresh_value(letter: DeadLetter, now: int, bound: Bound, allow_stale: bool) -> tuple[bytes, str | None] | str:
    """The bytes a replay publishes, and what the audit log notes of their age; or why not.

    A proposal or a decision goes back as it was (its own signature's window judges it). A
    record of an internal topic goes back with the time it was produced: its original bytes, or
    one item in a batch of its own stamped with its batch's time. Past the freshness bound that
    would be refused downstream, so it is refused here, unless `allow_stale`: then the batch is
    stamped now and its original age kept in `first_produced_at_ms`."""
    if letter.source_topic not in INTERNAL_SOURCES:
        return letter.value, None
    items = [letter.value]
    produced = letter.produced_at_ms or letter.dead_lettered_at_ms
    first = produced
    if letter.payload_kind is PayloadKind.RECORD:
        try:
            batch = codec().decode(letter.value, StageBatch)
        except DecodeError:
            return letter.value, None  # never a batch: it is dead-lettered again, as it was
        items, produced = batch.items, batch.produced_at_ms
        first = batch.first_produced_at_ms or produced
    too_old = stale(produced, now, bound)
    if too_old is None:
        if letter.payload_kind is PayloadKind.RECORD:
            return letter.value, None
        return _batch(letter, items, produced, first), None
    if not allow_stale:
        return f"its record is stale ({too_old}); --allow-stale sends it on, stamped anew"
    note = f"stale record sent on by the operator: first produced at {first} ms, {(now - first) // 1000} s ago"
    return _batch(letter, items, now, min(first, now) if first > 0 else now), note


def _batch(letter: DeadLetter, items: list[bytes], produced: int, first: int) -> bytes:
    """Items going back to their home partition, as a batch of their own."""
    batch = StageBatch(
        stage="dlq-replay",
        source_partition=letter.source_partition,
        items=items,
        produced_at_ms=produced,
        first_produced_at_ms=first,
    )
    return codec().encode(batch)


def _unreplayable(found: Letter, sealer: Sealer, topics: Topics) -> str | None:
    """Why a letter must not go back where it came from, if it must not.

    A replay is sealed anew, so it must never launder what no stage wrote: the letter itself
    must carry its stage MAC, and a whole record from an internal topic must still carry the
    MAC it arrived with (a record dead-lettered *because* its MAC failed stays a forgery).
    Items of a batch were checked before they were decoded; proposals and decisions are
    checked again by their signatures."""
    letter = found.letter
    if found.unreadable:
        return f"its MAC cannot be checked ({found.unreadable}): no toolgate stage is known to have written it"
    if not found.genuine:
        return "it carries no valid stage MAC: no toolgate stage wrote it"
    if letter.source_topic not in CONSUMED:
        return f"{letter.source_topic!r} is no topic a stage reads"
    if letter.payload_kind is PayloadKind.RECORD and letter.source_topic in MACED:
        original = [(h.key, h.value) for h in letter.headers]
        if not sealer.mac_ok(topics.name(letter.source_topic), letter.value, original):
            return f"the original {letter.source_topic} record never carried a valid stage MAC"
    return None


def discard(settings: Settings, dead_letter_id: str, actor: str, note: str | None) -> None:
    _record(settings, find(settings, dead_letter_id).letter, "discarded", actor, note)
