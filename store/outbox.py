"""toolgate.outbox: records to publish, written in the same transaction as the state they describe
and published by the outbox relay (workers/outbox/relay.py).

Every stage that changes state writes its rows here (`enqueue`; the rows are built by
workers/runtime/outbox.py). Execution inserts its results held (`enqueue_held`): it publishes them
itself once its transaction committed and marks them sent (`mark_published`); the relay leaves a
held row alone for `HOLD_S`. The relay claims unsent rows (`claim`), marks them sent or failed,
counts failed attempts, prunes old sent rows and listens for inserts (a trigger notifies
`toolgate_outbox`). A re-drive (workers/reconciliation/redrive.py) makes every row the broker may
have lost due again (`rewind`). `toolgate status` and the gauges count the unsent rows (`backlog`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import psycopg
from psycopg import AsyncConnection, AsyncCursor
from psycopg.types.json import Jsonb

from toolgate.store.db import jsonb, one_row
from toolgate.topics.catalog import Topics

INSERT = """
INSERT INTO toolgate.outbox (topic, partition, kind, key, payload, headers)
SELECT * FROM unnest(%b::text[], %b::integer[], %b::text[], %b::bytea[], %b::bytea[], %b::jsonb[])
"""
# How long the relay leaves a held row to the writer that publishes it itself: far longer than a
# round takes to produce (milliseconds), short enough that a row a crash left goes out soon.
HOLD_S = 5.0
INSERT_HELD = """
INSERT INTO toolgate.outbox (topic, partition, kind, key, payload, headers, retry_at)
SELECT u.*, now() + make_interval(secs => %s)
FROM unnest(%b::text[], %b::integer[], %b::text[], %b::bytea[], %b::bytea[], %b::jsonb[]) AS u
RETURNING id
"""
MARK_SENT = "UPDATE toolgate.outbox SET sent_at = now() WHERE id = ANY(%b)"
# A held row its writer published: unless a re-drive released it meanwhile (retry_at cleared,
# the broker that took it having lost it) or the relay sent it already.
MARK_PUBLISHED = """
UPDATE toolgate.outbox SET sent_at = now() WHERE id = ANY(%b) AND sent_at IS NULL AND retry_at IS NOT NULL
"""
CLAIM = """
SELECT id, topic, partition, kind, key, payload, headers, (extract(epoch FROM created_at) * 1000)::bigint
FROM toolgate.outbox
WHERE sent_at IS NULL AND (retry_at IS NULL OR retry_at <= now()) ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED
"""
COUNT_ATTEMPT = """
UPDATE toolgate.outbox SET attempts = attempts + 1,
    retry_at = now() + make_interval(secs => least(60, 2 ^ least(attempts, 10)))
WHERE id = ANY(%b) RETURNING id, attempts
"""
MARK_FAILED = """
UPDATE toolgate.outbox o SET sent_at = now(), failed_at = now(), error = f.error
FROM unnest(%b::bigint[], %b::text[]) AS f(id, error) WHERE o.id = f.id
"""
PRUNE = "DELETE FROM toolgate.outbox WHERE sent_at < now() - make_interval(secs => %s)"
# When the next unsent row with a time of its own (a held row's hold, a retry's backoff) is due.
NEXT_DUE = """
SELECT extract(epoch FROM min(retry_at) - now())::float8 FROM toolgate.outbox
WHERE sent_at IS NULL AND retry_at IS NOT NULL
"""
LISTEN = "LISTEN toolgate_outbox"
# Sent rows that were not given up (a row marked failed was dead-lettered instead), and rows
# waiting: held for the execution that published them (which may have published them to the
# broker that lost them, and now may not mark them sent: `mark_published`), or backing
# off after a failed try. All are due at once.
REWIND = """
UPDATE toolgate.outbox SET sent_at = NULL, attempts = 0, retry_at = NULL
WHERE failed_at IS NULL AND (sent_at IS NOT NULL OR retry_at > now())
"""
# What `toolgate status` and the gauges show of the outbox: the rows not yet sent, by Postgres's clock.
BACKLOG = """
SELECT count(*), extract(epoch FROM now() - min(created_at))::float8, count(*) FILTER (WHERE retry_at > now())
FROM toolgate.outbox WHERE sent_at IS NULL
"""


class RowKind(StrEnum):
    """`toolgate.outbox.kind` (its CHECK, migration 0001): what a row holds."""

    ITEM = "item"  # one StageRecord or ExecutionResult, batched by the relay for its partition
    RECORD = "record"  # a whole edge record, with its key and headers


@dataclass(frozen=True)
class OutboxRow:
    """A row to insert: an item of a stage batch for one partition, or an edge record."""

    topic: str  # logical
    partition: int | None
    kind: RowKind
    key: bytes | None
    payload: bytes
    headers: tuple[tuple[str, str], ...] = ()
    tenant: str | None = None  # for a per-tenant topic


@dataclass(frozen=True, slots=True)
class Claimed:
    """An unsent row the relay claimed, locked until its transaction ends."""

    id: int
    topic: str  # physical
    partition: int | None
    kind: RowKind
    key: bytes | None
    payload: bytes
    headers: list[list[str]]
    created_at_ms: int  # the batch it goes out in keeps its age visible (first_produced_at_ms)


@dataclass(frozen=True, slots=True)
class Backlog:
    """The unsent rows: how many, the oldest one's age, and how many wait for a retry."""

    unsent: int
    oldest_age_s: float | None
    retrying: int  # failed once and waiting for their next attempt


Columns = tuple[list[str], list[int | None], list[str], list[bytes | None], list[bytes], list[Jsonb]]


def columns(rows: list[OutboxRow], topics: Topics) -> Columns:
    """INSERT's parameters: one array per column. Rows name physical topics (with the
    deployment's prefix), so any relay publishes them where this deployment reads. The
    payloads go as they are, bytea: no base64, no JSON around them."""
    return (
        [topics.name(r.topic, r.tenant) for r in rows],
        [r.partition for r in rows],
        [r.kind for r in rows],
        [r.key for r in rows],
        [r.payload for r in rows],
        [jsonb([list(h) for h in r.headers]) for r in rows],
    )


async def enqueue(conn: AsyncConnection[Any], rows: list[OutboxRow], topics: Topics) -> None:
    """Insert rows inside the caller's transaction."""
    if rows:
        await conn.execute(INSERT, columns(rows, topics))


async def enqueue_held(
    conn: AsyncConnection[Any], rows: list[OutboxRow], topics: Topics, hold_s: float = HOLD_S
) -> AsyncCursor[Any]:
    """Insert rows the caller publishes itself once its transaction committed; the relay takes
    them only if they are still unsent `hold_s` after. The cursor returns their ids (`held_ids`; in a
    pipeline, once it is synced)."""
    return await conn.execute(INSERT_HELD, (hold_s, *columns(rows, topics)))


async def held_ids(cur: AsyncCursor[Any]) -> list[int]:
    """The ids of the rows `enqueue_held` inserted."""
    return [int(row[0]) for row in await cur.fetchall()]


async def mark_sent(conn: AsyncConnection[Any], sent: list[int]) -> None:
    """The rows were acknowledged by the broker: the relay has nothing left to do for them."""
    await conn.execute(MARK_SENT, (sent,))


async def mark_published(conn: AsyncConnection[Any], published: list[int]) -> None:
    """Held rows their writer published and the broker acknowledged: sent, unless a re-drive
    released them since (the broker lost what it took) or the relay sent them already."""
    await conn.execute(MARK_PUBLISHED, (published,))


async def claim(conn: AsyncConnection[Any], limit: int) -> list[Claimed]:
    """Up to `limit` unsent rows that are due, in id order, locked; rows another relay holds are
    skipped."""
    cur = await conn.execute(CLAIM, (limit,))
    return [Claimed(r[0], r[1], r[2], RowKind(r[3]), r[4], r[5], r[6], r[7]) for r in await cur.fetchall()]


async def count_attempts(conn: AsyncConnection[Any], failing: list[int]) -> dict[int, int]:
    """Count a failed attempt for each row and put it off (backing off up to a minute); each
    row's attempts so far, by id."""
    cur = await conn.execute(COUNT_ATTEMPT, (failing,))
    return {int(row_id): int(attempts) for row_id, attempts in await cur.fetchall()}


async def mark_failed(conn: AsyncConnection[Any], given_up: list[int], errors: list[str]) -> None:
    """Rows given up (dead-lettered): sent, failed, with why."""
    await conn.execute(MARK_FAILED, (given_up, errors))


async def prune(conn: AsyncConnection[Any], retention_s: float) -> int:
    """Delete rows sent longer than `retention_s` ago; how many."""
    cur = await conn.execute(PRUNE, (retention_s,))
    return cur.rowcount


async def next_due(conn: AsyncConnection[Any]) -> float | None:
    """Seconds until the next held or retried row is due (negative: overdue; None: none waits)."""
    row = await (await conn.execute(NEXT_DUE)).fetchone()
    return None if row is None or row[0] is None else float(row[0])


async def listen(conn: AsyncConnection[Any]) -> None:
    """Be notified of every transaction that inserts rows (on a connection in autocommit mode)."""
    await conn.execute(LISTEN)


async def rewind(conn: AsyncConnection[Any]) -> int:
    """Make every row not given up due at once, sent or waiting, for the relay to publish again
    (the broker lost what it took); how many."""
    cur = await conn.execute(REWIND)
    return cur.rowcount


def backlog(conn: psycopg.Connection[Any]) -> Backlog:
    """The unsent rows, aged by Postgres's own `now()`."""
    return Backlog(*one_row(conn, BACKLOG))
