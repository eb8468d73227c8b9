"""Execution asks Postgres, not the message, whether a held call may run: a Postgres effect.

The execution handler against a database of this module's own on the session's Postgres, with
invoice.create_draft held for one approval (as the shipped policy does in prod). The ticket is
written as approval-wait would; the effect runs only under it, consumes it in the effect's own
transaction, and nothing else runs under a consumed ticket.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Sequence
from typing import Any

from psycopg.types.json import Jsonb

from tests.unit.factories import record_of
from toolgate.contracts.registry import load_registry
from toolgate.schemas.codec import codec
from toolgate.schemas.hashing import payload_hash
from toolgate.schemas.models import ExecutionResult, PayloadKind, Principal, StageRecord
from toolgate.workers.approval.decision import approval_id_for
from toolgate.workers.execution.handler import ExecutionHandler
from toolgate.workers.runtime.emit import Emit, Origin
from toolgate.workers.runtime.handler import Inbound

from .conftest import Database

TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def held_draft(operation: str, call_id: str | None = None, amount: int = 100, user: str = "u") -> StageRecord:
    arguments = {
        "customer_id": "cust_acme01",
        "currency": "USD",
        "due_date": "2030-12-31",
        "memo": None,
        "lines": [{"description": "held", "quantity": 1, "unit_amount_cents": amount}],
    }
    return record_of(
        call_id=call_id or f"call_{uuid.uuid4().hex}",
        traceparent=TRACE,
        home_partition=0,
        tenant_id="acme",
        principal=Principal(user_id=user, agent_id="cli", scopes=["invoices:write"]),
        workflow_id="w",
        run_id="r",
        logical_operation_id=operation,
        tool_name="invoice.create_draft",
        tool_version="1.0.0",
        arguments=arguments,
        payload_hash=payload_hash(arguments),
        created_at_ms=int(time.time() * 1000),
        required_approvals=1,
    )


def approve(database: Database, record: StageRecord, approvers: tuple[str, ...] = ("carol",)) -> str:
    approval_id = approval_id_for(record.call.tenant_id, record.call.call_id)
    database.sql(
        "INSERT INTO toolgate.approvals (approval_id, call_id, tenant_id, run_id, tool_name, tool_version, "
        "payload_hash, risk_class, required_approvals, status, home_partition, request, packet, expires_at) "
        "VALUES (%s, %s, 'acme', 'r', %s, %s, %s, 'MEDIUM_RISK_WRITE', 1, 'APPROVED', 0, %s, %s, "
        "now() + interval '10 minutes')",
        (
            approval_id,
            record.call.call_id,
            record.call.tool_name,
            record.call.tool_version,
            record.call.payload_hash,
            codec().encode(record),
            Jsonb({"requested_by": record.call.principal.model_dump(mode="json")}),  # as the packet names it
        ),
    )
    for who in approvers:
        database.sql(
            "INSERT INTO toolgate.approval_decisions (decision_id, approval_id, approver_id, verdict, decided_at) "
            "VALUES (%s, %s, %s, 'APPROVE', now())",
            (f"dec_{uuid.uuid4().hex}", approval_id, who),
        )
    return approval_id


def run(database: Database, *records: StageRecord) -> list[ExecutionResult]:
    """One round of the execution handler; the results it wrote to the outbox for these calls."""

    async def once() -> None:
        handler = ExecutionHandler(load_registry(), database.settings)
        await handler.start()
        try:
            calls = [
                Inbound(
                    r,
                    codec().encode(r),
                    Origin("executable", 0, 0, None, [], PayloadKind.STAGE_ITEM),
                    traceparent=TRACE,
                )
                for r in records
            ]
            await handler.handle(calls, Emit("execution"))
        finally:
            await handler.http.close()
            await handler.pool.close()

    asyncio.run(once())
    results = []
    for (payload,) in database.sql("SELECT payload FROM toolgate.outbox WHERE topic = 'tool.results' ORDER BY id"):
        result = codec().decode(bytes(payload), ExecutionResult)
        if result.call_id in {r.call.call_id for r in records}:
            results.append(result)
    return results


def outcome(result: ExecutionResult) -> tuple[str, Any]:
    return str(result.outcome.taxonomy_class), [e.code for e in result.errors]


def invoices_of(database: Database, call_id: str) -> int:
    return int(database.sql("SELECT count(*) FROM demo.invoices WHERE created_by_call = %s", (call_id,))[0][0])


def test_a_held_postgres_effect_runs_once_under_its_ticket_and_consumes_it(database: Database) -> None:
    record = held_draft(f"op_{uuid.uuid4().hex[:8]}")
    approval_id = approve(database, record)
    [first] = run(database, record)
    assert outcome(first) == ("SUCCESS", [])
    [(consumed_by,)] = database.sql("SELECT consumed_by FROM toolgate.approvals WHERE approval_id = %s", (approval_id,))
    assert consumed_by and consumed_by.startswith("tg_")
    second = run(database, record)[-1]  # the same operation again: its stored result, no second effect
    assert outcome(second) == ("SUCCESS", []) and second.idempotency_hit
    assert invoices_of(database, record.call.call_id) == 1


def test_no_ticket_or_too_few_approvers_runs_nothing(database: Database) -> None:
    unapproved = held_draft(f"op_{uuid.uuid4().hex[:8]}")
    # Held for two (as a charge is): a ticket one approver approved does not cover it.
    short = held_draft(f"op_{uuid.uuid4().hex[:8]}").model_copy(update={"required_approvals": 2})
    approve(database, short)
    results = {r.call_id: outcome(r) for r in run(database, unapproved, short)}
    assert results == {
        unapproved.call.call_id: ("CONFIRMATION_MISSING", ["no_approval"]),
        short.call.call_id: ("CONFIRMATION_MISSING", ["too_few_approvers"]),
    }
    assert invoices_of(database, unapproved.call.call_id) == invoices_of(database, short.call.call_id) == 0


def approver(
    database: Database, name: str, risk_classes: list[str], groups: Sequence[str] = (), status: str = "active"
) -> None:
    """An approver of acme's (a key no decision is signed with: the tests write decisions directly)."""
    database.sql(
        "INSERT INTO toolgate.approvers (approver_id, public_key, risk_classes, groups, tenants, status) "
        "VALUES (%s, %s, %s, %s, '{acme}', %s) ON CONFLICT DO NOTHING",
        (name, name.encode().ljust(32, b"\x00")[:32], risk_classes, list(groups), status),
    )


def test_a_ticket_releases_only_its_own_payload_and_only_active_approvers_count(database: Database) -> None:
    record = held_draft(f"op_{uuid.uuid4().hex[:8]}")
    approve(database, record)
    other_payload = held_draft(record.call.logical_operation_id, call_id=record.call.call_id, amount=999_999)
    [mismatch] = run(database, other_payload)
    assert outcome(mismatch) == ("CONFIRMATION_MISSING", ["approval_mismatch"])
    approver(database, "revoked-approver", ["MEDIUM_RISK_WRITE"], status="revoked")
    revoked = held_draft(f"op_{uuid.uuid4().hex[:8]}")
    approve(database, revoked, approvers=("revoked-approver",))
    [not_counted] = run(database, revoked)
    assert outcome(not_counted) == ("CONFIRMATION_MISSING", ["too_few_approvers"])
    assert invoices_of(database, record.call.call_id) == invoices_of(database, revoked.call.call_id) == 0


def test_only_approvers_still_of_the_tickets_class_and_groups_count(database: Database) -> None:
    """Execution counts an approval again in its own transaction as approval-wait counted it: an
    approver no longer allowed the ticket's risk class, or in none of the groups it reached (the
    policy's: StageRecord.approver_groups), does not count, whatever the decisions table holds."""
    approver(database, "narrowed", ["HIGH_RISK_EXTERNAL"], groups=["billing-leads"])
    narrowed = held_draft(f"op_{uuid.uuid4().hex[:8]}")
    approve(database, narrowed, approvers=("narrowed",))
    grouped = held_draft(f"op_{uuid.uuid4().hex[:8]}")
    ticket = approve(database, grouped)  # carol: a billing lead
    database.sql(
        "UPDATE toolgate.approvals SET approver_groups = '{finance-directors}' WHERE approval_id = %s", (ticket,)
    )
    counted = held_draft(f"op_{uuid.uuid4().hex[:8]}")
    both = approve(database, counted)
    database.sql("UPDATE toolgate.approvals SET approver_groups = '{billing-leads}' WHERE approval_id = %s", (both,))
    results = {r.call_id: outcome(r) for r in run(database, narrowed, grouped, counted)}
    assert results[narrowed.call.call_id] == ("CONFIRMATION_MISSING", ["too_few_approvers"])
    assert results[grouped.call.call_id] == ("CONFIRMATION_MISSING", ["too_few_approvers"])
    assert results[counted.call.call_id][0] == "SUCCESS"
    assert invoices_of(database, narrowed.call.call_id) == invoices_of(database, grouped.call.call_id) == 0


def test_an_approver_acting_as_the_requesting_user_does_not_count(database: Database) -> None:
    """Execution counts a ticket's approvers itself: one who acts as the user its packet names as
    the call's requester is not counted (issue 52, part 4), whatever the decisions table holds:
    linked to that user after voting, or a decision row written past approval-wait."""
    approver(database, "self-approver", ["MEDIUM_RISK_WRITE"])
    own = held_draft(f"op_{uuid.uuid4().hex[:8]}", user="u_self")
    approve(database, own, approvers=("self-approver",))
    others = held_draft(f"op_{uuid.uuid4().hex[:8]}", user="u_other")
    approve(database, others, approvers=("self-approver",))
    database.sql("UPDATE toolgate.approvers SET acts_as = '{u_self}' WHERE approver_id = 'self-approver'")
    results = {r.call_id: outcome(r) for r in run(database, own, others)}
    assert results[own.call.call_id] == ("CONFIRMATION_MISSING", ["too_few_approvers"])
    assert results[others.call.call_id][0] == "SUCCESS"
    assert invoices_of(database, own.call.call_id) == 0
    assert invoices_of(database, others.call.call_id) == 1
