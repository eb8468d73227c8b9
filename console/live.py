"""The inbox, live: one Postgres connection LISTENs on migration 0031's channel (a ticket opened,
escalated, decided or expired; a decision recorded on one), and each page's Server-Sent Events
stream is told the ids of the changed tickets its approver may see. A notice is a hint to read
again, never the data: the page fetches its fragment, rendered from the tables. The connection is
store/notifications.py's, the outbox relay's loop, which wakes only when the server sends
something; a lost one is opened again; pages also hear a heartbeat, and their stream ends with the session.

Which streams may hear of which tickets is read once for every batch of notices, for all the open
streams' approvers at once (`console_inbox.seen_by`): a burst of tickets costs the console one
query, not one per ticket and open page."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from aiohttp import web

from toolgate.console.checks import session_alive
from toolgate.console.state import CONSOLE, current_session, required_session
from toolgate.store import console_inbox
from toolgate.store.db import AsyncConnectionPool
from toolgate.store.notifications import listening

log = logging.getLogger("toolgate.console")
HEARTBEAT_S = 15.0
END = ""  # no ticket's id: the stream ends


class Live:
    """The changed tickets' ids, each told to the open streams whose approver may see it."""

    def __init__(self, database_url: str, pool: AsyncConnectionPool) -> None:
        self.database_url, self.pool = database_url, pool
        self.streams: dict[asyncio.Queue[str], str] = {}  # each open stream, and its approver
        self.changed: set[str] = set()  # tickets heard of, not yet told
        self.woken = asyncio.Event()
        self.tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        listen = listening(self.database_url, console_inbox.listen, self.heard, log, "console")
        self.tasks = [asyncio.create_task(listen), asyncio.create_task(self._telling())]

    def heard(self, approval_ids: list[str]) -> None:
        self.changed.update(approval_ids)
        self.woken.set()

    async def _telling(self) -> None:
        """Tell each batch of changed tickets to the streams that may see them, for as long as
        the server runs; a failed read is logged and the batch's tickets heard again later."""
        while True:
            await self.woken.wait()
            self.woken.clear()
            changed, self.changed = sorted(self.changed), set()
            if not changed or not self.streams:
                continue
            try:
                async with self.pool.connection() as conn:
                    seen = await console_inbox.seen_by(conn, changed, sorted(set(self.streams.values())))
            except Exception:
                log.exception("could not read who may see %d changed tickets", len(changed))
                await asyncio.sleep(1.0)
                self.heard(changed)
                continue
            self.tell(seen)

    def tell(self, seen: set[tuple[str, str]]) -> None:
        """Put each (ticket, approver) pair's ticket on that approver's open streams."""
        for queue, approver_id in list(self.streams.items()):
            for approval_id, seer in sorted(seen):
                if seer == approver_id:
                    queue.put_nowait(approval_id)

    def end_streams(self) -> None:
        """Tell every open stream to end (the server is stopping: a page's EventSource reconnects)."""
        for queue in list(self.streams):
            queue.put_nowait(END)

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def events(request: web.Request) -> web.StreamResponse:
    session = await required_session(request)
    live: Live = request.app[CONSOLE].live
    queue: asyncio.Queue[str] = asyncio.Queue()
    live.streams[queue] = session.approver_id
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
            await response.write(f"event: approval\ndata: {approval_id}\n\n".encode())
    except (ConnectionResetError, asyncio.CancelledError):
        pass
    finally:
        live.streams.pop(queue, None)
    return response
