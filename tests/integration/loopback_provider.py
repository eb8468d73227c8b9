"""A reconciler whose provider is a real HTTP server on loopback (aiohttp), answering the demo
provider's status query, `GET /v1/operations/{key}`, as the test says: the reconciliation tests'
one way to put a provider in front of `Reconciler.reconcile_once`."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from aiohttp import web

from tests.unit.factories import registry
from toolgate.settings import Settings
from toolgate.workers.reconciliation.reconciler import Reconciler

Status = Callable[[web.Request], Awaitable[web.Response]]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@asynccontextmanager
async def reconciler_asking(database_url: str, home: Path, status: Status) -> AsyncIterator[Reconciler]:
    """A Reconciler on `database_url` whose demo provider answers each status query with `status`
    (its token under `home`); closed, with the server, on the way out."""
    app = web.Application()
    app.router.add_get("/v1/operations/{key}", status)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    (home / "demo-provider-token").write_text("token-value")
    endpoints = {"demo_provider": f"http://127.0.0.1:{port}"}
    settings = Settings(database_url=database_url, home=home, secrets_dir=home, endpoints=endpoints)
    reconciler = Reconciler(registry(), settings)
    try:
        yield reconciler
    finally:
        await reconciler.http.close()
        await reconciler.pool.close()
        await runner.cleanup()
