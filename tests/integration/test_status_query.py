"""The provider's status query, against a real HTTP server on loopback that answers badly.

A redirect is not followed (it would leave the egress allowlist with the credentials
attached), and an answer that is not a JSON object is an unknown outcome, never an error that
stalls every reconciliation pass.
"""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

from aiohttp import web

from tests.unit.factories import registry, stage_record
from toolgate.secrets import SecretProvider
from toolgate.settings import Settings
from toolgate.workers.execution.executors import Job, Unknown
from toolgate.workers.execution.http import HttpExecutor


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _status_against(answer: Any, tmp_path: Path) -> tuple[Any, list[str]]:
    seen: list[str] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        seen.append(request.path)
        if request.path.startswith("/elsewhere"):
            return web.json_response({"status": "completed", "response": {"leaked": True}})
        return answer(request)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    port = _port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    (tmp_path / "demo-provider-token").write_text("token-value")
    settings = Settings(endpoints={"demo_provider": f"http://127.0.0.1:{port}"}, secrets_dir=tmp_path)
    executor = HttpExecutor(settings, SecretProvider(tmp_path))
    await executor.open()
    try:
        contract = registry().get("payment.charge_card", "1.0.0")
        job = Job(stage_record(contract), contract, "key-1", 0)
        return await executor.status(job, 0), seen
    finally:
        await executor.close()
        await runner.cleanup()


def test_a_redirecting_status_query_is_not_followed(tmp_path: Path) -> None:
    def redirect(_: web.Request) -> web.Response:
        return web.Response(status=302, headers={"Location": "/elsewhere"})

    outcome, seen = asyncio.run(_status_against(redirect, tmp_path))
    assert isinstance(outcome, Unknown) and "302" in outcome.reason
    assert not [p for p in seen if p.startswith("/elsewhere")]


def test_a_status_answer_that_is_no_json_object_is_unknown(tmp_path: Path) -> None:
    for body in ([1, 2, 3], "completed", None):
        outcome, _ = asyncio.run(_status_against(lambda r, b=body: web.json_response(b), tmp_path))
        assert isinstance(outcome, Unknown), body
