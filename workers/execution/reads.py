"""A read runs once per call: a copy of it is answered from its first outcome.

A read changes nothing, so it reserves no idempotency key. But the same call may come again: a
client re-publishes a call it heard no answer to, and anyone who captured a proposal may replay
its bytes while its signature's window lasts (review N5). Run again, such a copy would count
again against the tenant's rate limits and budgets and could be answered differently. So
execution keeps each read's final outcome by (tenant, call_id), for as long as a copy of it can
pass validation (the proposal window: retention.py), and answers a copy from it:

    a read whose (tenant, call_id)          what it gets
    has no outcome stored                   it runs; its final outcome is stored with it
    has the outcome of the same request     that outcome again (idempotency_hit); nothing runs
    has the outcome of another request      it runs (validation binds a call_id to one proposal,
                                            so no genuine call gets here)

Policy counts a read once per call likewise (toolgate.hashing.read_event). An interim answer
(an outcome still unknown) is not stored: the call is not over. The reads and writes are one
statement each per round, in the round's transactions (store/reads.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import AsyncConnection

from toolgate.hashing import request_hash
from toolgate.schemas.models import ExecutionResult
from toolgate.store import reads as read_outcomes
from toolgate.store.db import rows_json
from toolgate.store.reads import Ident, ReadOutcome
from toolgate.workers.execution.answers import replay, stored_response
from toolgate.workers.execution.attempt import Attempt


def answered(a: Attempt, stored: dict[Ident, ReadOutcome], now: int) -> ExecutionResult | None:
    """A read's first outcome, answered again, if it has one for the same request (pure)."""
    found = stored.get((a.record.tenant_id, a.record.call_id))
    if found is None or found.request_hash != request_hash(a.record):
        return None
    return replay(a.record, a.traceparent, found.response, now)


async def replay_copies(conn: AsyncConnection[Any], attempts: Sequence[Attempt], now: int) -> None:
    """Answer each read that already has a first outcome from it."""
    if not attempts:
        return
    found = await read_outcomes.load(conn, [(a.record.tenant_id, a.record.call_id) for a in attempts])
    stored = {outcome.ident: outcome for outcome in found}
    for a in attempts:
        a.result = answered(a, stored, now)


def outcome_row(a: Attempt, res: ExecutionResult) -> tuple[str, str, str, str]:
    """A read's final outcome, as the store keeps it (store/reads.py `store`)."""
    return (a.record.tenant_id, a.record.call_id, request_hash(a.record), rows_json(stored_response(res)))
