"""Execution's reads and writes of approval tickets and target state (clearance.py decides).

All inside the caller's transaction: tickets are read under FOR UPDATE; a ticket is consumed
in the transaction of its effect (the reservation's, for an effect outside Postgres, which
cannot share one) and spent in the one that records its operation's end (store/approvals.py
`spend`, `spend_operation`, which hold the statements); a target's state is read under FOR
UPDATE when the effect commits in the same transaction, and always within the calls' time left
(bounds.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import AsyncConnection

from toolgate.store import approvals
from toolgate.store import bounds as store_bounds
from toolgate.workers.execution import bounds
from toolgate.workers.execution.bounds import Cut
from toolgate.workers.execution.clearance import Ticket
from toolgate.workers.execution.effects import Job
from toolgate.workers.runtime import clock, fact_loader, facts, target_state


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


async def state_now(conn: AsyncConnection[Any], jobs: Sequence[Job], for_update: bool) -> list[str | Cut | None]:
    """Each call's target state version as it is now (None: its contract binds no state).

    Read within the calls' time left, as their effects run (bounds.py): in a savepoint, under
    the least time left of theirs, a lock another transaction holds on a target waited on for
    half of it, so no held row keeps the call past its deadline. A read a bound cut was rolled
    back with its savepoint and the transaction goes on: a lone call gets the cut (`Cut`); of
    several, each is read again on its own with its own time left, the earliest deadline first,
    so only a call whose target is held gets it."""
    found = await _bounded(conn, jobs, for_update)
    if len(jobs) == 1 or not any(isinstance(version, Cut) for version in found):
        return found
    again: dict[int, str | Cut | None] = {}
    for i in sorted(range(len(jobs)), key=lambda i: jobs[i].deadline_ms):
        [again[i]] = await _bounded(conn, [jobs[i]], for_update)
    return [again[i] for i in range(len(jobs))]


async def _bounded(conn: AsyncConnection[Any], jobs: Sequence[Job], for_update: bool) -> list[str | Cut | None]:
    """The calls' target versions, read in a savepoint between the bounds set and set back."""
    wanted = facts.needed(ref for job in jobs for ref in target_state.refs(job.record, job.contract))
    rows: fact_loader.Found = {}
    if wanted:
        limits = bounds.limits(list(jobs), clock.now_ms())
        try:
            async with conn.transaction():
                await conn.execute(*store_bounds.limits(limits.statement_ms, limits.lock_ms), prepare=False)
                rows = await fact_loader.fetch(conn, wanted, for_update=for_update)
                await conn.execute(store_bounds.PRIOR, prepare=False)
        except psycopg.Error as exc:
            if (exc.sqlstate or "") not in bounds.CUT:
                raise
            return [Cut(exc.sqlstate or "", limits) for _ in jobs]
    return [target_state.bound_version(job.record, job.contract, rows) for job in jobs]
