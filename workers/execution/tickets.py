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

    Read within the calls' time left, as their effects run (bounds.py), in one bounded section
    (store/bounds.py: its savepoint, the bounds, the lookups, the bounds set back and the
    savepoint released, one round trip): under the least time left of theirs, a lock another
    transaction holds on a target waited on for half of it, so no held row keeps the call past
    its deadline. A read a bound cut was rolled back with its savepoint and the transaction goes
    on: a lone call gets the cut (`Cut`); of several, each is read again in a section of its
    own, with its own time left, the earliest deadline first (`_each`), so only a call whose
    target is held gets it."""
    found = await _together(conn, jobs, for_update)
    if len(jobs) == 1 or not any(isinstance(version, Cut) for version in found):
        return found
    return await _each(conn, jobs, for_update)


def _wanted(jobs: Sequence[Job]) -> dict[str, set[str]]:
    return facts.needed(ref for job in jobs for ref in target_state.refs(job.record, job.contract))


async def _together(conn: AsyncConnection[Any], jobs: Sequence[Job], for_update: bool) -> list[str | Cut | None]:
    """The calls' target versions, read in one bounded section."""
    wanted = _wanted(jobs)
    rows: fact_loader.Found = {}
    if wanted:
        limits = bounds.limits(list(jobs), clock.now_ms())
        try:
            async with store_bounds.section(conn, limits.statement_ms, limits.lock_ms, savepoint=True):
                sent = await fact_loader.send(conn, wanted, for_update)
            rows = await fact_loader.received(sent)
        except psycopg.Error as exc:
            if (exc.sqlstate or "") not in bounds.CUT:
                raise
            return [Cut(exc.sqlstate or "", limits) for _ in jobs]
    return [target_state.bound_version(job.record, job.contract, rows) for job in jobs]


async def _each(conn: AsyncConnection[Any], jobs: Sequence[Job], for_update: bool) -> list[str | Cut | None]:
    """Each call's target version, read in a section of its own with its own time left, the
    earliest deadline first, the sections one after another in one pipeline (one round trip).
    A section a bound cut is rolled back; the server skipped those after it, which go again in
    the next pipeline: a round trip more for each call cut (and one for its rollback)."""
    found: dict[int, str | Cut | None] = {
        i: target_state.bound_version(job.record, job.contract, {}) for i, job in enumerate(jobs) if not _wanted([job])
    }
    order = sorted((i for i in range(len(jobs)) if i not in found), key=lambda i: jobs[i].deadline_ms)
    while order:
        limits = {i: bounds.limits([jobs[i]], clock.now_ms()) for i in order}
        sent, sqlstate = await _sections(conn, [(i, jobs[i], limits[i]) for i in order], for_update)
        done = 0  # the calls read, in order: those before the one cut
        for i in order:
            if i not in sent or not fact_loader.answered(sent[i]):
                break
            found[i] = target_state.bound_version(jobs[i].record, jobs[i].contract, await fact_loader.received(sent[i]))
            done += 1
        if done < len(order):
            if sqlstate is None:
                raise RuntimeError(f"{len(order) - done} target reads went unanswered, none refused")
            found[order[done]] = Cut(sqlstate, limits[order[done]])
        order = order[done + 1 :]
    return [found[i] for i in range(len(jobs))]


async def _sections(
    conn: AsyncConnection[Any], reads: list[tuple[int, Job, bounds.Limits]], for_update: bool
) -> tuple[dict[int, fact_loader.Sent], str | None]:
    """The reads in one pipeline, a bounded section each (its bounds less the server's time
    since the pipeline began: as if each were sent when its turn came): the lookups each sent,
    and the SQLSTATE of a bound that cut one (None: none was)."""
    sent: dict[int, fact_loader.Sent] = {}
    try:
        async with store_bounds.undone(conn), conn.pipeline():
            await store_bounds.began(conn)
            for i, job, limits in reads:
                await store_bounds.enter(conn, store_bounds.since(limits.statement_ms, limits.lock_ms))
                sent[i] = await fact_loader.send(conn, _wanted([job]), for_update)
                await store_bounds.leave(conn)
    except psycopg.Error as exc:
        if (exc.sqlstate or "") not in bounds.CUT:
            raise
        return sent, exc.sqlstate
    return sent, None
