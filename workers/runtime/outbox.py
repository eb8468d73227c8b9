"""Writing outbox rows: records to publish, in the same transaction as the state they describe.

Any Kafka write that follows from a Postgres state change (an execution's result, an
approval's release, an expiry) goes through here, so the state and the record that announces
it commit or roll back together; the outbox relay publishes them.

A writer on a call's critical path may publish its rows itself, once they are committed, rather
than wait for the relay to be woken: it inserts them held (`enqueue_held`), which the relay
leaves alone for `HOLD_S`, produces them, and marks them sent (`mark_published`) once the
broker acknowledged them. A writer that dies in between leaves them to the relay when the hold ends,
so a held row is published at least once, as every row is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection, AsyncCursor
from psycopg.types.json import Jsonb

from toolgate.schemas.codec import codec
from toolgate.schemas.models import ExecutionResult, StageRecord
from toolgate.schemas.wire import WireModel
from toolgate.store.db import jsonb
from toolgate.topics.catalog import Topics
from toolgate.topics.headers import edge_headers
from toolgate.workers.runtime import results
from toolgate.workers.runtime.emit import Emit


@dataclass(frozen=True)
class OutboxRow:
    topic: str  # logical
    partition: int | None
    kind: str  # 'item' | 'record'
    key: bytes | None
    payload: bytes
    headers: tuple[tuple[str, str], ...] = ()
    tenant: str | None = None  # for a per-tenant topic


def item(topic: str, partition: int, model: StageRecord | ExecutionResult) -> OutboxRow:
    data = results.encoded(model) if isinstance(model, ExecutionResult) else codec().encode(model)
    return OutboxRow(topic, partition, "item", None, data)


def record(
    topic: str,
    model: WireModel,
    *,
    key: str,
    traceparent: str,
    call_id: str,
    tenant_id: str,
    tenant_topic: bool = False,
) -> OutboxRow:
    """An edge record; with `tenant_topic`, to the topic of `tenant_id` itself."""
    c = codec()
    headers = tuple(
        (k, v.decode()) for k, v in edge_headers(traceparent, call_id, tenant_id, c.fingerprint_of(type(model)))
    )
    return OutboxRow(topic, None, "record", key.encode(), c.encode(model), headers, tenant_id if tenant_topic else None)


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


async def enqueue(conn: AsyncConnection[object], rows: list[OutboxRow], topics: Topics) -> None:
    """Insert rows inside the caller's transaction."""
    if rows:
        await conn.execute(INSERT, columns(rows, topics))


@dataclass(frozen=True)
class Held:
    """Item rows inserted held, for their writer to publish once its transaction committed."""

    ids: list[int]
    rows: list[OutboxRow]

    def publish(self, out: Emit) -> None:
        """Hand the rows to the round's output; the round marks them sent once acknowledged."""
        for row in self.rows:
            if row.kind != "item" or row.partition is None:
                raise ValueError(f"only item rows are held, not a {row.kind} row for {row.topic}")
            out.raw_item(row.topic, row.partition, row.payload)
        out.outbox_ids.extend(self.ids)


async def enqueue_held(
    conn: AsyncConnection[Any], rows: list[OutboxRow], topics: Topics, hold_s: float = HOLD_S
) -> AsyncCursor[Any]:
    """Insert rows the caller publishes itself once its transaction committed; the relay takes
    them only if they are still unsent `hold_s` after. The cursor returns their ids (in a
    pipeline, once it is synced)."""
    return await conn.execute(INSERT_HELD, (hold_s, *columns(rows, topics)))


async def mark_sent(conn: AsyncConnection[Any], ids: list[int]) -> None:
    """The rows were acknowledged by the broker: the relay has nothing left to do for them."""
    await conn.execute(MARK_SENT, (ids,))


async def mark_published(conn: AsyncConnection[Any], ids: list[int]) -> None:
    """Held rows their writer published and the broker acknowledged: sent, unless a re-drive
    released them since (the broker lost what it took) or the relay sent them already."""
    await conn.execute(MARK_PUBLISHED, (ids,))
