"""The inbox, live: one Postgres connection LISTENs on migration 0031's channel (a ticket opened,
escalated, decided or expired; a decision recorded on one), and each page's Server-Sent Events
stream is told the ids of the changed tickets its approver may see. A notice is a hint to read
again, never the data: the page fetches its fragment, rendered from the tables. The connection is
store/notifications.py's, the outbox relay's loop, which wakes only when the server sends
something; a lost one is opened again; pages also hear a heartbeat, and their stream ends with the session."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from aiohttp import web

from toolgate.console.checks import session_alive
from toolgate.console.state import CONSOLE, current_session, required_session
from toolgate.store import console_inbox
from toolgate.store.notifications import listening

log = logging.getLogger("toolgate.console")
HEARTBEAT_S = 15.0
END = ""  # no ticket's id: the stream ends


class Live:
    """The changed tickets' ids, fanned out to every open stream."""

    def __init__(self, database_url: str) -> None:
        self.database_url = database_url
        self.streams: set[asyncio.Queue[str]] = set()
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.create_task(listening(self.database_url, console_inbox.listen, self.heard, log, "console"))

    def heard(self, approval_ids: list[str]) -> None:
        for approval_id in approval_ids:
            for queue in list(self.streams):
                queue.put_nowait(approval_id)

    def end_streams(self) -> None:
        """Tell every open stream to end (the server is stopping: a page's EventSource reconnects)."""
        for queue in list(self.streams):
            queue.put_nowait(END)

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task


async def _relevant(request: web.Request, approver_id: str, approval_id: str) -> bool:
    async with request.app[CONSOLE].pool.connection() as conn:
        found = await console_inbox.card(conn, approver_id, approval_id)
    return found is not None and found.served


async def events(request: web.Request) -> web.StreamResponse:
    session = await required_session(request)
    live: Live = request.app[CONSOLE].live
    queue: asyncio.Queue[str] = asyncio.Queue()
    live.streams.add(queue)
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store"})
    await response.prepare(request)
    try:
        await response.write(b": connected\n\n")
        while True:
            try:
                approval_id = await asyncio.wait_for(queue.get(), HEARTBEAT_S)
            except TimeoutError:
                still = await current_session(request)
                if still is None or not session_alive(still, still.now):
                    break
                await response.write(b": heartbeat\n\n")
                continue
            if approval_id == END:
                break
            if await _relevant(request, session.approver_id, approval_id):
                await response.write(f"event: approval\ndata: {approval_id}\n\n".encode())
    except (ConnectionResetError, asyncio.CancelledError):
        pass
    finally:
        live.streams.discard(queue)
    return response
