"""Postgres notifications reach the outbox relay as they arrive, and a broken listening
connection says so (workers/outbox/notifications.py), on the session's real Postgres."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest

from toolgate.workers.outbox.notifications import each_notification

from .conftest import Database

CHANNEL = "toolgate_outbox"


async def _listening(url: str) -> psycopg.AsyncConnection[Any]:
    conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
    await conn.execute(f"LISTEN {CHANNEL}")
    return conn


async def _notify(url: str, times: int = 1) -> None:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as other:
        for _ in range(times):
            await other.execute(f"NOTIFY {CHANNEL}")


def test_every_notification_wakes_the_listener(database: Database) -> None:
    async def scenario() -> int:
        conn = await _listening(database.database_url)
        woken = asyncio.Event()
        count = 0

        def notify() -> None:
            nonlocal count
            count += 1
            woken.set()

        listener = asyncio.ensure_future(each_notification(conn, notify))
        for _ in range(3):
            woken.clear()
            await _notify(database.database_url)
            await asyncio.wait_for(woken.wait(), 10.0)
        listener.cancel()
        await conn.close()
        return count

    assert asyncio.run(scenario()) >= 3


def test_a_connection_the_server_ends_raises(database: Database) -> None:
    async def scenario() -> None:
        conn = await _listening(database.database_url)
        pid = conn.pgconn.backend_pid
        listener = asyncio.ensure_future(each_notification(conn, lambda: None))
        database.sql("SELECT pg_terminate_backend(%s)", (pid,))
        with pytest.raises(psycopg.OperationalError):
            await asyncio.wait_for(listener, 10.0)
        await conn.close()

    asyncio.run(scenario())
