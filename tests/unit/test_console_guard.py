"""The console's middleware (console/guard.py) before any session is read: every answer carries
the strict headers; a request for a Host the console does not answer is refused (421); a POST
from another Origin, or with neither Origin nor Referer, is refused (403); one from its own passes."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from toolgate.console.guard import CSP, guard
from toolgate.console.state import CONSOLE, Console
from toolgate.settings import Settings
from toolgate.store.db import make_pool

PORT = 8765
OWN = f"http://127.0.0.1:{PORT}"
ORIGIN_REFUSED = (403, "refused: this request does not come from the console's own origin")


async def ok(request: web.Request) -> web.StreamResponse:
    return web.Response(text="ok")


def answer(method: str, path: str, headers: dict[str, str]) -> tuple[int, str, str | None]:
    async def go() -> tuple[int, str, str | None]:
        app = web.Application()
        pool = make_pool("postgresql://nowhere/none", "console-test")  # never opened: no session is read
        app[CONSOLE] = Console(Settings(home=Path("/nonexistent")), pool, lambda d, p: None, PORT)
        request = make_mocked_request(method, path, headers={"Host": f"127.0.0.1:{PORT}", **headers}, app=app)
        try:
            response = await guard(request, ok)
        except web.HTTPException as refused:
            return refused.status, refused.text or "", refused.headers.get("Content-Security-Policy")
        assert isinstance(response, web.Response)
        return response.status, response.text or "", response.headers.get("Content-Security-Policy")

    return asyncio.run(go())


@pytest.mark.parametrize(
    ("method", "headers", "expected"),
    [
        ("GET", {}, (200, "ok")),
        ("GET", {"Host": f"localhost:{PORT}"}, (200, "ok")),
        ("GET", {"Host": "evil.example"}, (421, "this console does not answer that host name")),
        ("GET", {"Host": "127.0.0.1:9999"}, (421, "this console does not answer that host name")),
        ("POST", {"Origin": OWN}, (200, "ok")),
        ("POST", {"Origin": "http://evil.example"}, ORIGIN_REFUSED),
        ("POST", {"Origin": "null"}, ORIGIN_REFUSED),
        ("POST", {}, ORIGIN_REFUSED),
        ("POST", {"Referer": OWN + "/login"}, (200, "ok")),
        ("POST", {"Referer": "http://evil.example/"}, ORIGIN_REFUSED),
    ],
)
def test_the_guard_answers_only_its_own_host_and_origin_with_its_headers(
    method: str, headers: dict[str, str], expected: tuple[int, str]
) -> None:
    status, text, csp = answer(method, "/login/challenge", headers)
    assert (status, text) == expected
    assert csp == CSP
