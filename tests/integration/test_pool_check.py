"""A worker's pool checks a connection on checkout with a round trip only when it sat idle.

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

from toolgate.store.db import is_transient, make_pool

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
    monkeypatch.setattr("toolgate.store.db.STALE_AFTER_S", 0.0)

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
