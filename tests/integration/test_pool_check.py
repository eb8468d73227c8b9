"""A worker's pool checks a connection on checkout with a round trip only when it sat idle,
and plans each prepared statement once.

Against the session's real Postgres: a connection whose server process is terminated while it
sits idle in the pool is caught by the checkout check and replaced, so the caller never sees
it; one terminated moments after its last use reaches the caller, whose first statement fails
as a transient error (what retries a round), and the pool discards it on its return: the
check made no round trip for it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest

from toolgate.workers.runtime.db import is_transient, make_pool

from .conftest import Database


async def _backend_pid(pool: Any) -> int:
    async with pool.connection() as conn:
        row = await (await conn.execute("SELECT pg_backend_pid()")).fetchone()
        return int(row[0])


def _terminate(url: str, pid: int) -> None:
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))


def test_a_connection_killed_while_idle_is_replaced_before_it_is_handed_out(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("toolgate.workers.runtime.db.STALE_AFTER_S", 0.0)

    async def scenario() -> tuple[int, int]:
        pool = make_pool(database.database_url, "pool-check-idle", max_size=1)
        await pool.open()
        try:
            first = await _backend_pid(pool)
            _terminate(database.database_url, first)
            await asyncio.sleep(0.05)
            return first, await _backend_pid(pool)
        finally:
            await pool.close()

    first, second = asyncio.run(scenario())
    assert second != first


def test_a_connection_killed_right_after_use_fails_transient_and_is_discarded(database: Database) -> None:
    async def scenario() -> tuple[int, BaseException | None, int]:
        pool = make_pool(database.database_url, "pool-check-hot", max_size=1)
        await pool.open()
        try:
            first = await _backend_pid(pool)
            _terminate(database.database_url, first)
            await asyncio.sleep(0.05)
            error: BaseException | None = None
            try:
                await _backend_pid(pool)
            except psycopg.Error as exc:
                error = exc
            return first, error, await _backend_pid(pool)
        finally:
            await pool.close()

    first, error, third = asyncio.run(scenario())
    assert error is not None and is_transient(error)
    assert third != first


def test_a_pool_connection_plans_a_prepared_statement_once(database: Database) -> None:
    """Postgres would plan a prepared statement that takes an array anew for each of its first
    five executions, and for every one after whenever the generic plan looks costlier; a
    worker's connection plans it once (workers/runtime/db.generic_plans)."""

    async def scenario() -> tuple[int, int]:
        pool = make_pool(database.database_url, "pool-check-plans", max_size=1)
        await pool.open()
        try:
            async with pool.connection() as conn:
                for _ in range(12):  # psycopg prepares it after five
                    await conn.execute("SELECT x FROM unnest(%b::text[]) AS x WHERE x <> %s", (["a", "b"], "c"))
                cur = await conn.execute(
                    "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE %s",
                    ("SELECT x FROM unnest%",),
                )
                row = await cur.fetchone()
                assert row is not None, "psycopg did not prepare the statement"
                return int(row[0]), int(row[1])
        finally:
            await pool.close()

    generic, custom = asyncio.run(scenario())
    assert custom == 0
    assert generic > 0
