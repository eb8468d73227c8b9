"""Postgres notifications reach their listener (the outbox relay, the webhook courier, the
console) as they arrive, with their payloads, and a broken listening connection says so
(store/notifications.py), on the session's real Postgres."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest

from toolgate.store.notifications import each_notification

from .conftest import Database

CHANNEL = "toolgate_outbox"


async def _listening(url: str) -> psycopg.AsyncConnection[Any]:
    conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
    await conn.execute(f"LISTEN {CHANNEL}")
    return conn


async def _notify(url: str, payload: str = "") -> None:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as other:
        await other.execute("SELECT pg_notify(%s, %s)", (CHANNEL, payload))


def test_every_notification_reaches_the_listener_with_its_payload(database: Database) -> None:
    async def scenario() -> list[str]:
        conn = await _listening(database.database_url)
        woken = asyncio.Event()
        payloads: list[str] = []

        def heard(batch: list[str]) -> None:
            payloads.extend(batch)
            woken.set()

        listener = asyncio.ensure_future(each_notification(conn, heard))
        for n in range(3):
            woken.clear()
            await _notify(database.database_url, f"apr_{n}")
            await asyncio.wait_for(woken.wait(), 10.0)
        listener.cancel()
        await conn.close()
        return payloads

    assert asyncio.run(scenario()) == ["apr_0", "apr_1", "apr_2"]


def test_a_connection_the_server_ends_raises(database: Database) -> None:
    async def scenario() -> None:
        conn = await _listening(database.database_url)
        pid = conn.pgconn.backend_pid
        listener = asyncio.ensure_future(each_notification(conn, lambda _batch: None))
        database.sql("SELECT pg_terminate_backend(%s)", (pid,))
        with pytest.raises(psycopg.OperationalError):
            await asyncio.wait_for(listener, 10.0)
        await conn.close()

    asyncio.run(scenario())
