"""The console's pages: the inbox of the open tickets an approver may decide, and a ticket's
card (what `toolgate approvals show` shows, its votes, its history, and the approve and deny
forms while it is open). Each has a fragment the page's script fetches again when a notice says
the ticket changed (console/live.py)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from toolgate.console.state import CONSOLE, required_session
from toolgate.console.views import card_view, inbox_row
from toolgate.store import console_inbox
from toolgate.store.console_sessions import Session


async def _inbox(request: web.Request, session: Session) -> list[dict[str, Any]]:
    async with request.app[CONSOLE].pool.connection() as conn:
        rows = await console_inbox.inbox(conn, session.approver_id)
    return [inbox_row(r) for r in rows]


async def inbox_page(request: web.Request) -> web.Response:
    session = await required_session(request)
    rows = await _inbox(request, session)
    return request.app[CONSOLE].render("inbox.html", session=session, rows=rows)


async def inbox_fragment(request: web.Request) -> web.Response:
    session = await required_session(request)
    return request.app[CONSOLE].render("_inbox.html", rows=await _inbox(request, session))


async def _card(request: web.Request, session: Session) -> dict[str, Any]:
    approval_id = request.match_info["approval_id"]
    async with request.app[CONSOLE].pool.connection() as conn:
        found = await console_inbox.card(conn, session.approver_id, approval_id)
        if found is None or not found.served:
            raise web.HTTPNotFound(text=f"no approval {approval_id} among those you decide")
        votes = await console_inbox.votes(conn, approval_id)
        waiting = bool(await console_inbox.inbox(conn, session.approver_id, approval_id))
    voted = any(v.approver_id == session.approver_id for v in votes)
    return {**card_view(found, votes), "decidable": waiting and not voted}


async def card_page(request: web.Request) -> web.Response:
    session = await required_session(request)
    card = await _card(request, session)
    return request.app[CONSOLE].render("card.html", session=session, card=card)


async def card_fragment(request: web.Request) -> web.Response:
    session = await required_session(request)
    card = await _card(request, session)
    return request.app[CONSOLE].render("_card.html", session=session, card=card)
