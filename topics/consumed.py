"""A consumed record's parts, read inside one guard: every Kafka read in toolgate goes through
`read`.

Whoever may write a topic chooses every byte of a record, its headers' keys included, and
confluent-kafka cannot hand every header back: `Message.headers()` raises (a SystemError
wrapping a UnicodeDecodeError) for a header whose key is not UTF-8, a record that kafka-python
and other clients can produce and the broker stores. Read outside a per-record guard, that one
record stopped a stage (it exited, restarted and read the same record again: every partition,
every tenant), a client's observation feed thread, `ApprovalClient.requests` and `dlq list`.

`read` takes the parts once, in one place, and never raises: a `Consumed` with all of them, or
an `Unreadable` with what could still be read (topic, partition, offset, key and value) and
why the rest could not. What a reader does with an unreadable record is its own choice:

    reader                                         an unreadable record
    a stage (workers/runtime/consumer.py)          dead-lettered with its key and value, audited
                                                   (bounded), its offset committed as any other
    a client's feed and readers (client/feed.py,
    client/observing.py), the bench's readers      skipped with a warning (`skipped`)
    dlq list/show/replay (ops/dlq.py)              listed as forged, never replayed

A record whose headers cannot be read carries no signature or MAC that could be checked (both
travel in headers), so a reader that skips it never drops a record toolgate or an agent signed.
"""

from __future__ import annotations

import logging
import operator
from dataclasses import dataclass, field
from typing import cast

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Message

# `msg.headers()` written out would not do: confluent-kafka returns the headers *and* leaves the
# decoding error set, and once CPython (3.11+) has specialized a call site it makes often, it no
# longer checks a C method's result for that. The error then leaks to a later, unrelated call:
# measured here, into the next `consume()`, and in a stage into the round's next statement. A
# methodcaller's call is always checked, so the SystemError is raised here, every time.
_HEADERS = operator.methodcaller("headers")
MAX_REASON = 200  # characters of the reason an unreadable record is logged, dead-lettered and audited with

# A consumed record's headers as confluent-kafka hands them back: (key, value or None) pairs.
ConsumedHeaders = list[tuple[str, bytes | None]]


@dataclass(frozen=True)
class Consumed:
    """Every part of a record, read."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: ConsumedHeaders = field(default_factory=list)
    timestamp_ms: int | None = None  # the record's Kafka timestamp, when it has one


@dataclass(frozen=True)
class Unreadable:
    """A record some part of which could not be read: what could be, and why not the rest."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    reason: str


# What reading a record gives: the one shape every reader of toolgate takes records in.
Read = Consumed | Unreadable


def read(msg: Message) -> Read:
    """The parts of a fetched record (one without an error). Never raises."""
    topic, partition, offset = str(msg.topic() or ""), msg.partition() or 0, msg.offset() or 0
    try:
        key, value = msg.key(), msg.value()
    except Exception as exc:  # no known record does this; a reader must still go on
        return Unreadable(topic, partition, offset, None, None, _reason("its key or value", exc))
    try:
        headers = _HEADERS(msg)
    except Exception as exc:
        return Unreadable(topic, partition, offset, key, value, _reason("its headers", exc))
    kind, at = msg.timestamp()
    # A consumer's headers are always (key, bytes or None) pairs; the type allows a producer's too.
    pairs = cast(ConsumedHeaders, list(headers or ()))
    return Consumed(topic, partition, offset, key, value, pairs, at if kind != TIMESTAMP_NOT_AVAILABLE else None)


def _reason(part: str, exc: BaseException) -> str:
    """Why `part` could not be read, in toolgate's words and the decoder's, bounded: for a header
    key, confluent-kafka raises a SystemError whose cause says what it could not decode."""
    cause = exc.__cause__ or exc.__context__
    if isinstance(cause, UnicodeDecodeError):
        why = f"a header key is not UTF-8 ({cause.reason} at byte {cause.start})"
    else:
        why = f"{type(exc).__name__}: {exc}"
    return f"{part} cannot be read: {why}"[:MAX_REASON]


def skipped(log: logging.Logger, record: Unreadable, reader: str) -> None:
    """Say that `reader` skipped an unreadable record: where it was and why, nothing it holds."""
    log.warning(
        "unreadable record skipped",
        extra={
            "action": "skip_unreadable",
            "reader": reader,
            "topic": record.topic,
            "partition": record.partition,
            "offset": record.offset,
            "error": record.reason,
        },
    )
