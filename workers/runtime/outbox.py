"""Writing outbox rows: records to publish, in the same transaction as the state they describe.

Any Kafka write that follows from a Postgres state change (an execution's result, an
approval's release, an expiry) goes through here, so the state and the record that announces
it commit or roll back together; the outbox relay publishes them.
"""

from __future__ import annotations

from dataclasses import dataclass

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from toolgate.schemas.codec import codec
from toolgate.schemas.models import ExecutionResult, StageRecord
from toolgate.schemas.wire import WireModel
from toolgate.topics.catalog import Topics
from toolgate.topics.headers import edge_headers
from toolgate.workers.runtime import results


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
SELECT * FROM unnest(%s::text[], %s::integer[], %s::text[], %s::bytea[], %s::bytea[], %s::jsonb[])
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
        [Jsonb([list(h) for h in r.headers]) for r in rows],
    )


async def enqueue(conn: AsyncConnection[object], rows: list[OutboxRow], topics: Topics) -> None:
    """Insert rows inside the caller's transaction."""
    if rows:
        await conn.execute(INSERT, columns(rows, topics))
