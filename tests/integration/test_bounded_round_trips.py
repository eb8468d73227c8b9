"""An approved call's re-read of its target (workers/execution/tickets.py) is one bounded section
in one round trip (store/bounds.py): its savepoint, the bounds, the lookup, the bounds set back
and the savepoint released, in one psycopg pipeline. Counted on the wire, on the session's real
Postgres: libpq's own trace of the connection (PQtrace) records every message each way, and a
round trip is a run of messages the client sent followed by the server's answer.

On the code before (dd53fb2), the same read took five round trips (SAVEPOINT, the bounds, the
lookup, the bounds set back, RELEASE), a cut one five (its rollback two), and the calls read
again after a cut five each, one call after another."""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import pq
from psycopg.rows import dict_row

from toolgate.store import batch
from toolgate.store import bounds as store_bounds
from toolgate.workers.execution import tickets
from toolgate.workers.execution.bounds import Cut
from toolgate.workers.execution.effects import Job
from toolgate.workers.runtime import target_state

from .conftest import Database
from .test_bounded_effects import BEFORE, held_elsewhere, job, new_invoice, voids_when_approved

Conn = psycopg.AsyncConnection[Any]


class Wire:
    """The messages a traced connection sent (F) and received (B), in order."""

    def __init__(self) -> None:
        self.directions: list[str] = []

    @property
    def round_trips(self) -> int:
        """How many times the client sent and then waited for the server's answer."""
        d = self.directions
        return sum(1 for i in range(len(d) - 1) if d[i] == "F" and d[i + 1] == "B")


@contextlib.asynccontextmanager
async def traced(conn: Conn) -> AsyncIterator[Wire]:
    """libpq's trace of `conn` while inside (timestamps left out: each line starts F or B)."""
    wire = Wire()
    fd, path = tempfile.mkstemp(prefix="toolgate-trace-")
    conn.pgconn.trace(fd)
    conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
    try:
        yield wire
    finally:
        conn.pgconn.untrace()  # flushes the trace's stream
        lines = Path(path).read_text().splitlines()
        os.unlink(path)
        wire.directions = [line.split("\t", 1)[0] for line in lines if line[:2] in ("F\t", "B\t")]


async def in_transaction(database: Database) -> Conn:
    """A connection as execution's recording opens one: autocommit, its BEGIN in a batch."""
    conn = await psycopg.AsyncConnection.connect(database.database_url, autocommit=True)
    await batch.run(conn, [batch.BEGIN])
    return conn


async def after(conn: Conn) -> dict[str, Any]:
    """The transaction's bounds and state after the read: what toolgate's own writes run under."""
    found: dict[str, Any] = {"status": conn.info.transaction_status.name}
    for name in ("statement_timeout", "lock_timeout"):
        found[name] = (await (await conn.execute(f"SHOW {name}")).fetchone() or [None])[0]
    return found


def version_of(database: Database, invoice: str) -> str:
    with psycopg.connect(database.database_url, row_factory=dict_row) as conn:
        return target_state.version(conn.execute(BEFORE, {"ids": [invoice]}).fetchone())


def locked(database: Database, invoice: str) -> bool:
    """Whether another transaction holds the invoice's row (FOR UPDATE NOWAIT from here fails)."""
    with psycopg.connect(database.database_url) as conn:
        try:
            conn.execute("SELECT 1 FROM demo.invoices WHERE invoice_id = %s FOR UPDATE NOWAIT", (invoice,))
        except psycopg.errors.LockNotAvailable:
            return True
    return False


CLEAN = {"status": "INTRANS", "statement_timeout": "0", "lock_timeout": "0"}


@pytest.mark.parametrize("for_update", [True, False])
def test_an_approved_targets_re_read_is_one_round_trip(database: Database, for_update: bool) -> None:
    invoice = new_invoice(database)
    voids = voids_when_approved("1.9.8")

    async def read() -> tuple[list[str | Cut | None], int, dict[str, Any], bool]:
        conn = await in_transaction(database)
        try:
            async with traced(conn) as wire:
                found = await tickets.state_now(conn, [job(voids, invoice, 2000)], for_update=for_update)
            return found, wire.round_trips, await after(conn), await asyncio.to_thread(locked, database, invoice)
        finally:
            await conn.close()

    found, round_trips, state, held = asyncio.run(read())
    assert found == [version_of(database, invoice)]
    assert round_trips == 1, f"the re-read took {round_trips} round trips"
    assert state == CLEAN, "the bounds are set back, the transaction goes on"
    assert held is for_update, "a row read FOR UPDATE stays locked once its savepoint is released"


def test_a_held_targets_re_read_is_cut_and_rolled_back_in_two_round_trips(database: Database) -> None:
    invoice = new_invoice(database)
    voids = voids_when_approved("1.9.9")

    async def read() -> tuple[list[str | Cut | None], int, dict[str, Any]]:
        conn = await in_transaction(database)
        try:
            async with traced(conn) as wire:
                found = await tickets.state_now(conn, [job(voids, invoice, 1000)], for_update=True)
            return found, wire.round_trips, await after(conn)
        finally:
            await conn.close()

    with held_elsewhere(database, invoice):
        started = time.monotonic()
        [cut], round_trips, state = asyncio.run(read())
        took = time.monotonic() - started
    assert isinstance(cut, Cut) and cut.sqlstate == "55P03" and cut.limits.lock_ms <= 500
    assert 0.4 < took < 1.0, f"the read waited {took:.2f} s: half of its 1 s"
    assert round_trips == 2, f"the cut read took {round_trips} round trips: the section, then its rollback"
    assert state == CLEAN, "the rollback to the savepoint ended the bounds, and only the savepoint"


def test_calls_read_again_after_a_cut_are_read_in_one_pipeline(database: Database) -> None:
    """Three calls read together, the middle one's target held: after the joint read is cut, the
    three go again in one pipeline, a section each, the earliest deadline first. The first is
    read, the second cut after half its own time left (less what the server already spent), the
    third skipped by the server and read in a pipeline of its own."""
    invoices = [new_invoice(database) for _ in range(3)]
    voids = voids_when_approved("1.9.10")
    jobs: list[Job] = []

    async def read() -> tuple[list[str | Cut | None], int, dict[str, Any], list[bool]]:
        conn = await in_transaction(database)
        try:
            jobs.extend(job(voids, invoice, left) for invoice, left in zip(invoices, (2000, 2400, 2800), strict=True))
            async with traced(conn) as wire:
                found = await tickets.state_now(conn, jobs, for_update=True)
            rows = [await asyncio.to_thread(locked, database, invoice) for invoice in (invoices[0], invoices[2])]
            return found, wire.round_trips, await after(conn), rows
        finally:
            await conn.close()

    with held_elsewhere(database, invoices[1]):
        started = time.monotonic()
        found, round_trips, state, rows = asyncio.run(read())
        took = time.monotonic() - started
    assert found[0] == version_of(database, invoices[0]) and found[2] == version_of(database, invoices[2])
    assert isinstance(found[1], Cut) and found[1].sqlstate == "55P03"
    # the joint read (1 s, half the least time left), then the held call's own: half of what it
    # had left (2.4 s less the 1 s gone): ~0.7 s, inside its deadline
    assert 1.5 < took < 2.4, f"answered after {took:.2f} s"
    assert round_trips == 5, (
        f"{round_trips} round trips: the joint read and its rollback, the three in one pipeline and the cut "
        "one's rollback, the one skipped after it"
    )
    assert state == CLEAN
    assert rows == [True, True], "the targets read are locked until the transaction ends"


def test_a_section_after_others_in_a_pipeline_counts_the_servers_time_before_it(database: Database) -> None:
    """`since`: a section queued after another that took 300 ms gets its time left less them, and
    its lock wait its share of that: as if it were sent on its own when its turn came."""

    async def bounds_seen() -> tuple[int, int]:
        conn = await in_transaction(database)
        try:
            async with conn.pipeline():
                await store_bounds.began(conn)
                await store_bounds.enter(conn, store_bounds.since(2000, 1000))
                await conn.execute("SELECT pg_sleep(0.3)")
                await store_bounds.leave(conn)
                await store_bounds.enter(conn, store_bounds.since(2000, 1000))
                cur = await conn.execute("SELECT current_setting('statement_timeout'), current_setting('lock_timeout')")
                await store_bounds.leave(conn)
            row = await cur.fetchone()
            assert row is not None and (await after(conn)) == CLEAN
            return int(row[0].removesuffix("ms")), int(row[1].removesuffix("ms"))
        finally:
            await conn.close()

    statement_ms, lock_ms = asyncio.run(bounds_seen())
    assert 1600 < statement_ms <= 1700, statement_ms
    assert 800 < lock_ms <= 850, lock_ms
