"""The console server's state, shared by its handlers: settings, a connection pool (as
`toolgate_console`, migration 0038: enrolment registers approvers only by burning an invitation
with its token), the templates, the live
notices (console/live.py) and the publisher of signed decisions. It holds no approver key."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import jinja2
from aiohttp import web

from toolgate.console.checks import SESSION_COOKIE, loopback, session_alive
from toolgate.schemas.models import ApprovalDecision, ApprovalRequest
from toolgate.settings import Settings
from toolgate.store import console_sessions
from toolgate.store.console_sessions import Session
from toolgate.store.db import AsyncConnectionPool

Publish = Callable[[ApprovalDecision, ApprovalRequest], None]
SESSION_S = 8 * 3600
CHALLENGE_S = 120


def templates() -> jinja2.Environment:
    """The console's templates, every value escaped unless a template says otherwise (none does)."""
    folder = resources.files("toolgate.console") / "templates"
    loader = jinja2.FunctionLoader(lambda name: (folder / name).read_text(encoding="utf-8"))
    return jinja2.Environment(loader=loader, autoescape=True, undefined=jinja2.StrictUndefined)


@dataclass
class Console:
    settings: Settings
    pool: AsyncConnectionPool
    publish: Publish
    port: int
    env: jinja2.Environment = field(default_factory=templates)
    live: Any = None  # console.live.Live, set when the server starts

    @property
    def hosts(self) -> frozenset[str]:
        """The Host headers the console answers (any other: a DNS rebinding, refused)."""
        names = {self.settings.console_host}
        if loopback(self.settings.console_host) or self.settings.console_host in ("0.0.0.0", "::"):
            names |= {"127.0.0.1", "localhost"}
        return frozenset(f"{name}:{self.port}" for name in names)

    def render(self, name: str, **values: Any) -> web.Response:
        return web.Response(text=self.env.get_template(name).render(**values), content_type="text/html")


CONSOLE: web.AppKey[Console] = web.AppKey("console", Console)


def digest(value: str) -> bytes:
    return hashlib.sha256(value.encode()).digest()


async def json_body(request: web.Request) -> dict[str, Any]:
    """A POST's JSON object; 400 for anything else."""
    try:
        body = await request.json()
    except ValueError as exc:
        raise web.HTTPBadRequest(text="expected a JSON object") from exc
    if not isinstance(body, dict):
        raise web.HTTPBadRequest(text="expected a JSON object")
    return body


async def current_session(request: web.Request) -> Session | None:
    """The request's live session (its cookie's row, before its expiry, its approver active); None otherwise."""
    cookie = request.cookies.get(SESSION_COOKIE)
    if not cookie:
        return None
    async with request.app[CONSOLE].pool.connection() as conn:
        found = await console_sessions.session(conn, digest(cookie))
    return found if found is not None and session_alive(found, found.now) else None


async def required_session(request: web.Request) -> Session:
    """The live session, or a redirect to the login page (a JSON or event request: 401)."""
    found = await current_session(request)
    if found is None:
        if request.method == "GET" and "text/html" in request.headers.get("Accept", ""):
            raise web.HTTPSeeOther("/login")
        raise web.HTTPUnauthorized(text="log in first")
    return found
