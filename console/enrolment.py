"""Enrolling from an invitation (`toolgate approvers invite`, ops/invitations.py).

The enrol page reads the token from the URL's fragment (never sent to a server, never in a log
or a Referer) and asks what it is for; the browser makes a non-extractable Ed25519 key and sends
only its public half. In one transaction the invitation is taken with its token (burnt, if it is
known, unused and unexpired: `toolgate.take_invitation`, the one way the console's role can burn
one; otherwise refused, saying why: `checks.invitation_refusal`) and the approver registered in its
tenants, groups and risk classes with that key (ops/approvers.py `record_approver`, audited as
`approver_registered` by `invitation:<token hash prefix>`; Postgres lets the console's role add
no other approver, migration 0038)."""

from __future__ import annotations

from typing import Any

from aiohttp import web
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from toolgate.console.checks import invitation_refusal
from toolgate.console.login import b64decode
from toolgate.console.state import CONSOLE, digest, json_body
from toolgate.ops.approvers import Grant, record_approver
from toolgate.ops.registry import RegistryError
from toolgate.store import invitations

MAX_TOKEN = 256


async def enrol_page(request: web.Request) -> web.Response:
    return request.app[CONSOLE].render("enrol.html", session=None)


async def _token(request: web.Request) -> tuple[dict[str, Any], str]:
    """The request's body and the invitation token it carries: printable, at most MAX_TOKEN
    characters (`approvers invite` makes 43), else 400: no such text is any invitation's."""
    body = await json_body(request)
    token = body.get("token")
    if not isinstance(token, str) or not token or len(token) > MAX_TOKEN or not token.isprintable():
        raise web.HTTPBadRequest(text="no invitation token")
    return body, token


async def check(request: web.Request) -> web.Response:
    """What an invitation is for, or why it cannot be used."""
    _, token = await _token(request)
    async with request.app[CONSOLE].pool.connection() as conn:
        found = await invitations.read(conn, digest(token))
    found = _usable(found)
    return web.json_response({"approver_id": found.approver_id, "tenants": found.tenants, "groups": found.groups})


def _usable(found: invitations.Invitation | None) -> invitations.Invitation:
    """The invitation, if it may be used now (by the database's clock); 410 Gone, saying why, if not."""
    refusal = invitation_refusal(found, found.now if found is not None else None)
    if found is None or refusal is not None:
        raise web.HTTPGone(text=refusal or "this invitation is not known")
    return found


def _public_key(value: object) -> bytes:
    raw = b64decode(value)
    try:
        Ed25519PublicKey.from_public_bytes(raw)
    except ValueError as exc:
        raise web.HTTPBadRequest(text="not an Ed25519 public key") from exc
    return raw


async def enrol(request: web.Request) -> web.Response:
    body, token = await _token(request)
    public_key = _public_key(body.get("public_key"))
    token_hash = digest(token)
    async with request.app[CONSOLE].pool.connection() as conn, conn.transaction():
        found = await invitations.take(conn, token)
        if found is None:
            _usable(await invitations.read(conn, token_hash))
            raise web.HTTPGone(text="this invitation has been used already")  # taken meanwhile
        actor = f"invitation:{token_hash.hex()[:12]}"
        try:
            grant = Grant(found.risk_classes, found.groups, found.tenants)
            await record_approver(conn, found.approver_id, public_key, grant, actor)
        except RegistryError as exc:
            raise web.HTTPConflict(text=str(exc)) from exc
    return web.json_response({"approver_id": found.approver_id})
