"""The console's pages: the inbox of the open tickets an approver may decide, and a ticket's
card (what `toolgate approvals show` shows, its votes, its history, and the approve and deny
forms while it is open). Each has a fragment the page's script fetches again when a notice says
the ticket changed (console/live.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from toolgate.console.state import CONSOLE, required_session
from toolgate.console.views import card_view, inbox_row
from toolgate.store import console_inbox, edits
from toolgate.store.console_sessions import Session


async def _inbox(request: web.Request, session: Session) -> list[dict[str, Any]]:
    async with request.app[CONSOLE].pool.connection() as conn:
        rows = await console_inbox.inbox(conn, session.approver_id)
    return [inbox_row(r) for r in rows]


async def _card(request: web.Request, session: Session) -> dict[str, Any]:
    approval_id = request.match_info["approval_id"]
    async with request.app[CONSOLE].pool.connection() as conn:
        found = await console_inbox.card(conn, session.approver_id, approval_id)
        if found is None or not found.served:
            raise web.HTTPNotFound(text=f"no approval {approval_id} among those you decide")
        votes = await console_inbox.votes(conn, approval_id)
        uncounted = await console_inbox.uncounted(conn, approval_id)
        waiting = bool(await console_inbox.inbox(conn, session.approver_id, approval_id))
        edit = await edits.edit_state_of(conn, approval_id)
    voted = any(v.approver_id == session.approver_id for v in votes)
    return {**card_view(found, votes, edit, uncounted), "decidable": waiting and not voted}


Handler = Callable[[web.Request], Awaitable[web.Response]]


def rendered(template: str, name: str, read: Callable[[web.Request, Session], Awaitable[Any]]) -> Handler:
    """A page or fragment: `template` rendered for the signed-in approver, with what `read` finds
    for its session as `name`."""

    async def handler(request: web.Request) -> web.Response:
        session = await required_session(request)
        found = await read(request, session)
        return request.app[CONSOLE].render(template, session=session, **{name: found})

    return handler


inbox_page = rendered("inbox.html", "rows", _inbox)
inbox_fragment = rendered("_inbox.html", "rows", _inbox)
card_page = rendered("card.html", "card", _card)
card_fragment = rendered("_card.html", "card", _card)
