"""Logging in to the console with a signed challenge, and out.

The server issues a random challenge (kept until used or expired); the browser signs
`checks.login_message(origin, challenge)` with the approver's key, which never leaves it; the
server takes the challenge once and verifies the signature against the approver's registered
public key. A session is then a server-side row (its cookie's sha256, its approver, a CSRF token,
an expiry) and a cookie that is HttpOnly, SameSite=Strict and, off loopback, Secure."""

from __future__ import annotations

import base64
import binascii
import secrets

from aiohttp import web
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from toolgate.console.checks import SESSION_COOKIE, cookie_attributes, login_message
from toolgate.console.state import CHALLENGE_S, CONSOLE, SESSION_S, current_session, digest, json_body
from toolgate.store import approvers, console_sessions

REFUSED = "refused: this key is not that of an active approver, or the challenge is used or expired"


def b64decode(text: object) -> bytes:
    if not isinstance(text, str):
        raise web.HTTPBadRequest(text="expected base64 text")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as exc:
        raise web.HTTPBadRequest(text="expected base64 text") from exc


def b64encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


async def login_page(request: web.Request) -> web.Response:
    return request.app[CONSOLE].render("login.html", session=await current_session(request))


async def challenge(request: web.Request) -> web.Response:
    issued = secrets.token_bytes(32)
    async with request.app[CONSOLE].pool.connection() as conn:
        await console_sessions.issue_challenge(conn, issued, CHALLENGE_S)
    return web.json_response({"challenge": b64encode(issued)})


def _verified(public_key: bytes, signature: bytes, message: bytes) -> bool:
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(signature, message)
    except (InvalidSignature, ValueError):
        return False
    return True


async def login(request: web.Request) -> web.Response:
    body = await json_body(request)
    approver_id, issued = str(body.get("approver_id", "")), b64decode(body.get("challenge"))
    signature = b64decode(body.get("signature"))
    console = request.app[CONSOLE]
    origin = f"{request.scheme}://{request.host}"
    async with console.pool.connection() as conn:
        fresh = await console_sessions.take_challenge(conn, issued)
        found = await approvers.deciding(conn, [approver_id])
        active = [a for a in found if a.active]
        if (
            not fresh
            or not active
            or not _verified(bytes(active[0].public_key), signature, login_message(origin, issued))
        ):
            raise web.HTTPForbidden(text=REFUSED)
        cookie, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        await console_sessions.open_session(conn, digest(cookie), approver_id, csrf, SESSION_S)
    response = web.json_response({"approver_id": approver_id})
    attrs = cookie_attributes(console.settings.console_host, SESSION_S)
    response.set_cookie(
        SESSION_COOKIE,
        cookie,
        max_age=attrs.max_age,
        path=attrs.path,
        secure=attrs.secure,
        httponly=attrs.httponly,
        samesite=attrs.samesite,
    )
    return response


async def logout(request: web.Request) -> web.Response:
    cookie = request.cookies.get(SESSION_COOKIE, "")
    async with request.app[CONSOLE].pool.connection() as conn:
        await console_sessions.close_session(conn, digest(cookie))
    response = web.HTTPSeeOther("/login")
    response.del_cookie(SESSION_COOKIE, path="/")
    raise response
