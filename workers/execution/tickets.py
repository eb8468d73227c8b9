"""Execution's reads and writes of approval tickets and target state (clearance.py decides).

All inside the caller's transaction: tickets are read under FOR UPDATE; a ticket is consumed
in the transaction of its effect (the reservation's, for an effect outside Postgres, which
cannot share one) and spent in the one that records its operation's end (store/approvals.py
`spend`, `spend_operation`, which hold the statements); a target's state is read under FOR
UPDATE when the effect commits in the same transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import AsyncConnection

from toolgate.contracts.contract import Contract
from toolgate.schemas.models import StageRecord
from toolgate.store import approvals
from toolgate.workers.execution.clearance import Ticket
from toolgate.workers.runtime import fact_loader, facts, target_state


async def load(conn: AsyncConnection[Any], approval_ids: Sequence[str]) -> dict[str, Ticket]:
    """The tickets, locked until the transaction ends."""
    ids = sorted(set(approval_ids))
    await approvals.lock(conn, ids)
    return {ticket.approval_id: ticket for ticket in await approvals.clearances(conn, ids)}


async def consume(conn: AsyncConnection[Any], released: dict[str, str]) -> set[str]:
    """Mark tickets as having released their operation (approval_id -> operation key); returns
    those that did (a ticket another operation consumed meanwhile is not among them)."""
    if not released:
        return set()
    return await approvals.consume(conn, list(released), list(released.values()))


async def state_now(
    conn: AsyncConnection[Any], calls: Sequence[tuple[StageRecord, Contract]], for_update: bool
) -> list[str | None]:
    """Each call's target state version as it is now (None: its contract binds no state)."""
    wanted = facts.needed(ref for record, contract in calls for ref in target_state.refs(record, contract))
    rows = await fact_loader.fetch(conn, wanted, for_update=for_update) if wanted else {}
    return [target_state.bound_version(record, contract, rows) for record, contract in calls]
