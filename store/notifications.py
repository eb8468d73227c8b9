"""Postgres notifications as they arrive, without polling for them.

psycopg's `AsyncConnection.notifies()` waits on the connection's socket but also wakes every
0.1 s (its wait interval, to let a Ctrl-C through), so an idle outbox relay woke ten times a
second to find nothing, a good share of its idle CPU
(docs/performance.md, "Figures behind the code"). libpq's own way wakes only when the server
sent something: wait until the socket is readable, read what arrived (`consume_input`), then take
the notifications it held. A connection that breaks makes the socket readable too, and
`consume_input` raises for it.

The connection must do nothing else while it listens. Three listeners share this loop: the outbox
relay and the webhook courier, woken to read their tables again (`waking`), and the console, which
hands each notice's payload (a ticket's id) to the pages that may show it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
from psycopg.pq import ConnStatus

Heard = Callable[[list[str]], None]  # a batch of notifications' payloads; [] on a (re)connect


def waking(event: asyncio.Event) -> Heard:
    """A listener that only needs to know something arrived: it sets `event`."""
    return lambda _payloads: event.set()


async def each_notification(conn: psycopg.AsyncConnection[Any], heard: Heard) -> None:
    """Call `heard` with the payloads of every batch of notifications `conn` receives; return
    never, raise `psycopg.OperationalError` when the connection breaks."""
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
            payloads = []
            while (notice := pgconn.notifies()) is not None:
                payloads.append(notice.extra.decode())
            if payloads:
                heard(payloads)
    finally:
        loop.remove_reader(socket)


async def listening(
    database_url: str,
    listen: Callable[[psycopg.AsyncConnection[Any]], Awaitable[None]],
    heard: Heard,
    log: logging.Logger,
    stage: str,
) -> None:
    """Tell `heard` of the notifications `listen` asks for as they arrive, and once on every
    (re)connect with none (what arrived while not listening is unknown: read again); reconnect a
    second after Postgres goes away. Never returns."""
    while True:
        try:
            async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
                await listen(conn)
                heard([])
                await each_notification(conn, heard)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("listen connection lost", extra={"stage": stage, "action": "relisten", "error": repr(exc)})
            await asyncio.sleep(1.0)
