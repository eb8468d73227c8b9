"""Re-drive on a database of this module's own (workers/reconciliation/redrive.py): what Postgres
holds in flight is said again through the outbox, and nothing else is. Re-drive only writes
outbox rows, so no broker is needed; the topic names carry a prefix of this test's own."""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import replace
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from toolgate.schemas.codec import codec
from toolgate.schemas.models import ApprovalRequest, StageRecord
from toolgate.settings import Settings
from toolgate.store import audit, outbox
from toolgate.store.outbox import INSERT, OutboxRow, RowKind
from toolgate.topics.catalog import Topics
from toolgate.trust.integrity import deployment_keys
from toolgate.workers.reconciliation.redrive import redrive

from ..unit.factories import registry, sample_models, stage_record
from .conftest import Database

SEND_EMAIL = registry().get("notify.send_email", "1.0.0")


def _ticket(conn: psycopg.Connection[Any], approval_id: str, status: str, consumed_by: str | None) -> None:
    record = stage_record(SEND_EMAIL, call_id=f"call_{approval_id}", approval_id=approval_id, required_approvals=1)
    packet = sample_models()[ApprovalRequest].model_copy(update={"approval_id": approval_id})
    conn.execute(
        "INSERT INTO toolgate.approvals (approval_id, call_id, tenant_id, run_id, tool_name, tool_version, "
        "payload_hash, risk_class, required_approvals, status, home_partition, request, packet, expires_at, "
        "consumed_by) VALUES (%s, %s, 'acme', 'r', 'notify.send_email', '1.0.0', 'h', 'HIGH_RISK_EXTERNAL', 1, %s, "
        "1, %s, %s, now() + interval '1 hour', %s)",
        (
            approval_id,
            record.call.call_id,
            status,
            codec().encode(record),
            json.dumps(packet.model_dump(mode="json")),
            consumed_by,
        ),
    )
    if status == "APPROVED":
        conn.execute(
            "INSERT INTO toolgate.approval_decisions (decision_id, approval_id, approver_id, verdict, decided_at) "
            "VALUES (%s, %s, 'carol', 'APPROVE', now())",
            (f"dec_{approval_id}", approval_id),
        )


def _outbox_row(conn: psycopg.Connection[Any], topic: str, payload: bytes) -> int:
    """An item row for `topic` (physical)."""
    conn.execute(INSERT, ([topic], [0], ["item"], [None], [payload], [Jsonb([])]))
    [(row_id,)] = conn.execute("SELECT max(id) FROM toolgate.outbox").fetchall()
    return int(row_id)


def _redrive(settings: Settings) -> dict[str, int]:
    audit.use_key(deployment_keys(settings).signing_key)

    async def one() -> dict[str, int]:
        async with await psycopg.AsyncConnection.connect(settings.database_url) as conn, conn.transaction():
            return await redrive(conn, Topics(settings.topic_prefix), rewind_outbox=True)

    return asyncio.run(one())


def test_redrive_says_again_what_is_in_flight_and_nothing_else(database: Database) -> None:
    settings = replace(database.settings, topic_prefix=f"redrive{uuid.uuid4().hex[:6]}.")
    with psycopg.connect(settings.database_url, autocommit=True) as conn:
        topic = Topics(settings.topic_prefix).results
        sent, given_up, unsent = (_outbox_row(conn, topic, f"row {n}".encode()) for n in range(3))
        conn.execute("UPDATE toolgate.outbox SET sent_at = now() WHERE id = ANY(%s)", ([sent, given_up],))
        conn.execute("UPDATE toolgate.outbox SET failed_at = now(), error = 'too large' WHERE id = %s", (given_up,))
        for approval_id, status, consumed_by in (
            ("apr_pending", "PENDING", None),
            ("apr_approved", "APPROVED", None),
            ("apr_ran", "APPROVED", "key-of-the-effect"),
            ("apr_denied", "DENIED", None),
        ):
            _ticket(conn, approval_id, status, consumed_by)

        counts = _redrive(settings)

        assert counts == {"approvals_pending": 1, "approvals_released": 1, "outbox_rows": 1}
        unsent_now = dict(conn.execute("SELECT id, sent_at IS NULL FROM toolgate.outbox WHERE id <= %s", (unsent,)))
        assert unsent_now == {sent: True, given_up: False, unsent: True}, "only the sent rows were rewound"
        said = conn.execute(
            "SELECT topic, payload FROM toolgate.outbox WHERE id > %s ORDER BY id", (unsent,)
        ).fetchall()
        prefix = settings.topic_prefix
        assert [t for t, _ in said] == [f"{prefix}tool.approvals.requested.acme", topic, f"{prefix}tool.executable"]
        released = codec().decode(bytes(said[2][1]), StageRecord)
        assert (released.call.call_id, released.approvers) == ("call_apr_approved", ["carol"])
        [(detail,)] = conn.execute(
            "SELECT detail FROM toolgate.audit_log WHERE action = 'transport_redriven'"
        ).fetchall()
        assert detail == counts


def test_a_result_execution_published_to_a_broker_that_lost_it_is_published_again(database: Database) -> None:
    """Execution publishes its results held, then marks them sent up to half a second later. A
    re-drive in between (the broker lost its topics, and with them what execution published)
    makes them due at once, and execution's late mark no longer hides them from the relay."""
    settings = replace(database.settings, topic_prefix=f"redrive{uuid.uuid4().hex[:6]}.")
    topics = Topics(settings.topic_prefix)

    async def publish_redrive_mark() -> list[tuple[bool, bool]]:
        async with await psycopg.AsyncConnection.connect(settings.database_url) as conn:
            rows = [OutboxRow("results", 0, RowKind.ITEM, None, b"published to a broker that lost it")]
            ids = [r[0] for r in await (await outbox.enqueue_held(conn, rows, topics)).fetchall()]
            await conn.commit()
            async with conn.transaction():
                await redrive(conn, topics, rewind_outbox=True)
            await outbox.mark_published(conn, ids)  # execution's mark, after the re-drive
            await conn.commit()
            cur = await conn.execute(
                "SELECT sent_at IS NULL, coalesce(retry_at <= now(), true) FROM toolgate.outbox WHERE id = ANY(%s)",
                (ids,),
            )
            return [(bool(unsent), bool(due)) for unsent, due in await cur.fetchall()]

    audit.use_key(deployment_keys(settings).signing_key)
    assert asyncio.run(publish_redrive_mark()) == [(True, True)], "unsent and due now: the relay publishes it"
