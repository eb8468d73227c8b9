"""Decisions signed in the approver's browser.

`prepare` hands the page the canonical decision document for the ticket, built by the one
builder the CLI and ApprovalClient use (toolgate/trust/signing.py `decision_document`), and the
exact bytes to sign (`signed_bytes`). The browser checks them against the card, signs them with
its key and sends back the signature; `submit` refuses a decision that is not the session's
approver's, not on an open ticket it may decide, or whose signature does not verify with its
registered key, and publishes the rest, already signed, onto the decisions topic
(ApprovalClient.publish_decision). Approval-wait verifies and counts it like any other: the
console holds no approver key, so it can approve nothing by itself."""

from __future__ import annotations

import asyncio
import secrets
import time
from typing import Any

from aiohttp import web
from pydantic import ValidationError

from toolgate.console.login import b64decode, b64encode
from toolgate.console.state import CONSOLE, json_body, required_session
from toolgate.schemas.models import ApprovalDecision, ApprovalRequest
from toolgate.store import approvers, console_inbox
from toolgate.store.console_sessions import Session
from toolgate.trust.signing import decision_document, signed_bytes, verify

REASON_MAX = 1000


async def _open_packet(request: web.Request, session: Session) -> ApprovalRequest:
    """The packet of the open ticket named in the path, if the session's approver may decide it."""
    approval_id = request.match_info["approval_id"]
    async with request.app[CONSOLE].pool.connection() as conn:
        waiting = await console_inbox.inbox(conn, session.approver_id, approval_id)
        found = await console_inbox.card(conn, session.approver_id, approval_id) if waiting else None
    if found is None:
        raise web.HTTPConflict(text=f"approval {approval_id} is not open for you to decide")
    return ApprovalRequest.model_validate(found.packet)


def _reason(body: dict[str, Any], approve: bool) -> str | None:
    reason = str(body.get("reason") or "").strip()
    if not approve and not reason:
        raise web.HTTPBadRequest(text="a denial needs a reason")
    if len(reason) > REASON_MAX:
        raise web.HTTPBadRequest(text=f"a reason is at most {REASON_MAX} characters")
    return reason or None


async def prepare(request: web.Request) -> web.Response:
    session = await required_session(request)
    body = await json_body(request)
    approve = body.get("verdict") == "APPROVE"
    if body.get("verdict") not in ("APPROVE", "DENY"):
        raise web.HTTPBadRequest(text="verdict: APPROVE or DENY")
    reason = _reason(body, approve)
    packet = await _open_packet(request, session)
    decision_id = f"dec_{secrets.token_hex(16)}"
    document = decision_document(packet, session.approver_id, approve, reason, decision_id, int(time.time() * 1000))
    shown = document.model_dump(mode="json", exclude={"signature"})
    return web.json_response({"document": shown, "signed_bytes": b64encode(signed_bytes(document))})


async def submit(request: web.Request) -> web.Response:
    session = await required_session(request)
    body = await json_body(request)
    try:
        decision = ApprovalDecision.model_validate(
            {**dict(body.get("document") or {}), "signature": b64decode(body.get("signature"))}
        )
    except (ValidationError, TypeError, ValueError) as exc:
        raise web.HTTPBadRequest(text="not a decision document") from exc
    packet = await _open_packet(request, session)
    if decision.approver_id != session.approver_id or decision.approval_id != packet.approval_id:
        raise web.HTTPForbidden(text="refused: a decision of another approver or on another ticket")
    async with request.app[CONSOLE].pool.connection() as conn:
        found = [a for a in await approvers.deciding(conn, [session.approver_id]) if a.active]
    if not found or not verify(decision, bytes(found[0].public_key)):
        raise web.HTTPForbidden(text="refused: the signature does not verify with your registered key")
    await asyncio.to_thread(request.app[CONSOLE].publish, decision, packet)
    return web.json_response({"decision_id": decision.decision_id, "approval_id": decision.approval_id})
