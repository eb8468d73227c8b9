"""Postgres notifications as they arrive, without polling for them.

psycopg's `AsyncConnection.notifies()` waits on the connection's socket but also wakes every
0.1 s (its wait interval, to let a Ctrl-C through), so an idle outbox relay woke ten times a
second to find nothing, a good share of its idle CPU
(docs/performance.md, "Figures behind the code"). libpq's own way wakes only when the server
sent something: wait until the socket is readable, read what arrived (`consume_input`), then take
the notifications it held. A connection that breaks makes the socket readable too, and
`consume_input` raises for it.

The connection must do nothing else while it listens (the relay's listener only LISTENs).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
from psycopg.pq import ConnStatus


async def each_notification(conn: psycopg.AsyncConnection[Any], notify: Callable[[], None]) -> None:
    """Call `notify` once for every batch of notifications `conn` receives; return never, raise
    `psycopg.OperationalError` when the connection breaks."""
    pgconn = conn.pgconn
    readable = asyncio.Event()
    loop = asyncio.get_running_loop()
    socket = pgconn.socket
    loop.add_reader(socket, readable.set)
    try:
        while True:
            await readable.wait()
            readable.clear()
            pgconn.consume_input()
            if pgconn.status != ConnStatus.OK:
                raise psycopg.OperationalError("the listening connection is closed")
            arrived = False
            while pgconn.notifies() is not None:
                arrived = True
            if arrived:
                notify()
    finally:
        loop.remove_reader(socket)


async def listening(
    database_url: str,
    listen: Callable[[psycopg.AsyncConnection[Any]], Awaitable[None]],
    wake: asyncio.Event,
    log: logging.Logger,
    stage: str,
) -> None:
    """Set `wake` whenever a notification `listen` asks for arrives, and once on every (re)connect
    (what arrived while not listening); reconnect a second after Postgres goes away. Never returns."""
    while True:
        try:
            async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
                await listen(conn)
                wake.set()
                await each_notification(conn, wake.set)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("listen connection lost", extra={"stage": stage, "action": "relisten", "error": repr(exc)})
            await asyncio.sleep(1.0)
