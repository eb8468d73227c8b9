"""The bounds a tool's own statements run within, inside the transaction that runs them
(workers/execution/executors.py): how long a statement may run and wait on a lock, and, for a
READ_ONLY tool, that it may not write.

Every setting is transaction-local (`set_config(..., true)`, as `SET LOCAL`): it ends with the
transaction, whatever happens. The limits are set before the effects and set back to the
values they replaced after them (`PRIOR`), so toolgate's own writes that follow in the same
transaction (keys, outbox rows, audit entries) are never cut by a call's deadline.

A READ_ONLY tool's statements run in a savepoint made read-only (`READ_ONLY`, then `END_READ`).
Postgres lets a read-write transaction turn read-only at any time, even after it wrote, and
only inside the savepoint: its end, released or rolled back, gives the transaction back its
read-write mode (tests/integration/test_bounded_effects.py holds the server to it). Inside it,
a statement that would write is refused with SQLSTATE 25006, and it may not turn read-write
again (25001). Writes to the session's own temporary tables stay allowed there, as in any
read-only transaction: they change nothing another session sees.

A bounded section (`section`) is all of it in one round trip: a psycopg pipeline of the
section's savepoint, the bounds, the statements the caller queues inside it (on cursors it
reads after), the bounds set back and the savepoint released. Postgres skips what follows a
refused statement in a pipeline up to its Sync, and the transaction is then in error: the
section rolls back to its savepoint (`UNDO`, one round trip more, only then), which ends the
bounds and a read-only savepoint with it (both were set inside it) and keeps the transaction
going, and raises the refusal. A section without a savepoint (a transaction run again whole if
a statement is refused) leaves that to its caller. Sections of several calls may follow one
another in one pipeline, each with its own bounds (`enter`, `leave`), those after the first
counting the time the server spent on the ones before (`since`): each ends by the time it was
given, as if it had been sent on its own when its turn came.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg import AsyncConnection
from psycopg.pq import TransactionStatus

from toolgate.store import batch
from toolgate.store.batch import Statement

# The bounds, and the values they replace kept aside (transaction-local placeholders) to be
# set back by `PRIOR`: one statement each way, no read of pg_settings (whose full scan cost the
# server ~0.5 ms a round, measured). The subquery (OFFSET 0: not flattened) runs first.
LIMITS = (
    "SELECT set_config('statement_timeout', %s, true), set_config('lock_timeout', %s, true) FROM (SELECT "
    "set_config('toolgate.prior_statement_timeout', current_setting('statement_timeout'), true), "
    "set_config('toolgate.prior_lock_timeout', current_setting('lock_timeout'), true) OFFSET 0) AS prior"
)
PRIOR = (
    "SELECT set_config('statement_timeout', current_setting('toolgate.prior_statement_timeout'), true), "
    "set_config('lock_timeout', current_setting('toolgate.prior_lock_timeout'), true)"
)
# The bounds of a section that follows others in one pipeline: shortened by the server's time
# since the pipeline began (`BEGAN`, its clock only), the lock wait keeping its share of it.
SINCE = (
    "SELECT set_config('statement_timeout', greatest(1, %s - spent)::text, true), "
    "set_config('lock_timeout', greatest(1, %s * (%s - spent) / %s)::text, true) FROM (SELECT "
    "set_config('toolgate.prior_statement_timeout', current_setting('statement_timeout'), true), "
    "set_config('toolgate.prior_lock_timeout', current_setting('lock_timeout'), true), "
    "(extract(epoch FROM clock_timestamp() - current_setting('toolgate.began')::timestamptz) * 1000)::bigint "
    "AS spent OFFSET 0) AS prior"
)
BEGAN = "SELECT set_config('toolgate.began', clock_timestamp()::text, true)"
SAVEPOINT = "SAVEPOINT toolgate_bounded"
RELEASE = "RELEASE SAVEPOINT toolgate_bounded"
UNDO: list[Statement] = [("ROLLBACK TO SAVEPOINT toolgate_bounded", None), (RELEASE, None)]
READ_ONLY_SAVEPOINT = "SAVEPOINT toolgate_read_only"
READ_ONLY = "SELECT set_config('transaction_read_only', 'on', true)"
END_READ = "RELEASE SAVEPOINT toolgate_read_only"


def limits(statement_ms: int, lock_ms: int) -> Statement:
    """The statement that bounds what follows in the transaction (milliseconds, each at least 1:
    0 would mean no bound at all)."""
    return LIMITS, (str(max(1, statement_ms)), str(max(1, lock_ms)))


def since(statement_ms: int, lock_ms: int) -> Statement:
    """`limits`, less the server's time since `BEGAN` (each still at least 1 ms)."""
    statement_ms, lock_ms = max(1, statement_ms), max(1, lock_ms)
    return SINCE, (statement_ms, lock_ms, statement_ms, statement_ms)


@asynccontextmanager
async def section(
    conn: AsyncConnection[Any], statement_ms: int, lock_ms: int, *, savepoint: bool
) -> AsyncIterator[None]:
    """What the caller queues inside, bounded, in one pipeline: one round trip (at its end).
    A refused statement is raised at the end, its savepoint rolled back first (`savepoint`)."""
    async with undone(conn, savepoint), conn.pipeline():
        await enter(conn, limits(statement_ms, lock_ms), savepoint)
        yield
        await leave(conn, savepoint)


@asynccontextmanager
async def undone(conn: AsyncConnection[Any], savepoint: bool = True) -> AsyncIterator[None]:
    """Sections sent inside: a statement refused in one rolls back to its savepoint (`UNDO`:
    whatever followed it up to the pipeline's end never ran) before the refusal is raised."""
    try:
        yield
    except psycopg.Error:
        if savepoint and not conn.broken and conn.info.transaction_status == TransactionStatus.INERROR:
            await batch.run(conn, UNDO)
        raise


async def enter(conn: AsyncConnection[Any], bounds: Statement, savepoint: bool = True) -> None:
    """Queue a section's start in the caller's pipeline: its savepoint, and `bounds` (`limits`,
    or `since` after `began`). Never prepared: psycopg could take a statement the server
    skipped, after a refused one, for prepared."""
    if savepoint:
        await conn.execute(SAVEPOINT, prepare=False)
    await conn.execute(*bounds, prepare=False)


async def leave(conn: AsyncConnection[Any], savepoint: bool = True) -> None:
    """Queue a section's end: the bounds set back, its savepoint released."""
    await conn.execute(PRIOR, prepare=False)
    if savepoint:
        await conn.execute(RELEASE, prepare=False)


async def began(conn: AsyncConnection[Any]) -> None:
    """Queue the server's clock reading that `since` counts from."""
    await conn.execute(BEGAN, prepare=False)
