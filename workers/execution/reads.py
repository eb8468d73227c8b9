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

Policy counts a read once per call likewise (toolgate.schemas.hashing.read_event). An interim answer
(an outcome still unknown) is not stored: the call is not over. The reads and writes are one
statement each per round, in the round's transactions (store/reads.py); this module is pure,
the driver (performer.py) reads and writes.
"""

from __future__ import annotations

from typing import Any

from toolgate.schemas.models import ExecutionResult, StageRecord
from toolgate.workers.execution.answers import replay, stored_response

Ident = tuple[str, str]  # (tenant_id, call_id)
FirstOutcome = tuple[str, dict[str, Any]]  # a read's first outcome: its request hash, its response


def answered(
    record: StageRecord, traceparent: str, stored: dict[Ident, FirstOutcome], now: int
) -> ExecutionResult | None:
    """A read's first outcome, answered again, if it has one for the same request."""
    found = stored.get((record.call.tenant_id, record.call.call_id))
    if found is None or found[0] != record.call.request_hash:
        return None
    return replay(record, traceparent, found[1], now)


def outcome_row(record: StageRecord, res: ExecutionResult) -> tuple[str, str, str, dict[str, Any]]:
    """A read's final outcome, as the store keeps it (store/reads.py `store`; the driver stores
    the response as JSON text)."""
    return (record.call.tenant_id, record.call.call_id, record.call.request_hash, stored_response(res))
