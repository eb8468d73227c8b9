"""The console's middleware: every response with a strict Content-Security-Policy (scripts only
from the console itself, no inline script, no framing); a request to a Host the console does not
answer refused (DNS rebinding); every POST from the console's own Origin, and every POST of a
session with that session's CSRF token (a form field or the X-CSRF-Token header)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from toolgate.console.checks import csrf_ok, origin_ok
from toolgate.console.state import CONSOLE, current_session

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",  # not no-referrer: with it, a form POST says Origin: null
    "Cache-Control": "no-store",
}
# POSTs made before there is a session to carry a CSRF token: login and enrolment (Origin-checked).
SESSIONLESS = frozenset({"/login/challenge", "/login", "/enrol/check", "/enrol"})


async def _csrf_given(request: web.Request) -> str | None:
    given = request.headers.get("X-CSRF-Token")
    if given is None and request.content_type == "application/x-www-form-urlencoded":
        value = (await request.post()).get("csrf_token")
        given = value if isinstance(value, str) else None
    return given


async def _check_post(request: web.Request) -> None:
    own = f"{request.scheme}://{request.host}"
    if not origin_ok(request.headers.get("Origin"), request.headers.get("Referer"), own):
        raise web.HTTPForbidden(text="refused: this request does not come from the console's own origin")
    if request.path in SESSIONLESS:
        return
    session = await current_session(request)
    if session is None:
        raise web.HTTPUnauthorized(text="log in first")
    if not csrf_ok(session.csrf_token, await _csrf_given(request)):
        raise web.HTTPForbidden(text="refused: missing or wrong CSRF token")


@web.middleware
async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        if request.host not in request.app[CONSOLE].hosts:
            raise web.HTTPMisdirectedRequest(text="this console does not answer that host name")
        if request.method == "POST":
            await _check_post(request)
        response = await handler(request)
    except web.HTTPException as refused:
        for name, value in HEADERS.items():
            refused.headers.setdefault(name, value)
        raise
    if not response.prepared:  # an event stream set its own when it started
        for name, value in HEADERS.items():
            response.headers.setdefault(name, value)
    return response
