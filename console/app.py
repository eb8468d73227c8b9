"""`toolgate console`: the approval console's server (aiohttp), its routes and its start.

Pages are rendered on the server (Jinja2, autoescape on); one static script (static/console.js,
no build step) makes and keeps the approver's key in the browser (WebCrypto Ed25519,
non-extractable, in IndexedDB), signs logins and decisions with it, and keeps the pages live over
Server-Sent Events. The server connects to Postgres with TOOLGATE_DATABASE_URL, as a login of
`toolgate_console` (migration 0038: what its pages do, and enrolment only by burning an invitation
with its token; ops/roles.py), and publishes decisions as the approval service; it holds no
approver key."""

from __future__ import annotations

from collections.abc import AsyncIterator
from importlib import resources

from aiohttp import web

from toolgate.client import ApprovalClient
from toolgate.console import decide, enrolment, live, login, pages
from toolgate.console.guard import guard
from toolgate.console.state import CONSOLE, Console
from toolgate.kafka_security import APPROVALS, client_config
from toolgate.schemas.models import ApprovalDecision, ApprovalRequest
from toolgate.settings import Settings
from toolgate.store.db import make_pool
from toolgate.topics.catalog import Topics
from toolgate.workers.runtime.wakeup import announce


class Publisher:
    """Publishes already-signed decisions as the approval service, and wakes approval-wait."""

    def __init__(self, settings: Settings, kafka_config: dict[str, str] | None = None) -> None:
        self.settings = settings
        self.client = ApprovalClient(
            settings.kafka_bootstrap,
            settings.topic_prefix,
            client_id="toolgate-console",
            kafka_config=kafka_config if kafka_config is not None else client_config(settings, APPROVALS),
        )
        self.topic = Topics(settings.topic_prefix).approvals_decisions

    def __call__(self, decision: ApprovalDecision, packet: ApprovalRequest) -> None:
        self.client.publish_decision(decision, packet)
        announce(self.settings.database_url, self.topic)

    def close(self) -> None:
        self.client.close()


async def script(request: web.Request) -> web.Response:
    text = (resources.files("toolgate.console") / "static" / "console.js").read_text(encoding="utf-8")
    return web.Response(text=text, content_type="text/javascript")


async def stylesheet(request: web.Request) -> web.Response:
    text = (resources.files("toolgate.console") / "static" / "console.css").read_text(encoding="utf-8")
    return web.Response(text=text, content_type="text/css")


def make_app(console: Console) -> web.Application:
    app = web.Application(middlewares=[guard], client_max_size=64 * 1024)
    app[CONSOLE] = console
    app.add_routes(
        [
            web.get("/", pages.inbox_page),
            web.get("/inbox", pages.inbox_fragment),
            web.get("/approvals/{approval_id}", pages.card_page),
            web.get("/approvals/{approval_id}/fragment", pages.card_fragment),
            web.post("/approvals/{approval_id}/prepare", decide.prepare),
            web.post("/approvals/{approval_id}/decide", decide.submit),
            web.get("/events", live.events),
            web.get("/login", login.login_page),
            web.post("/login/challenge", login.challenge),
            web.post("/login", login.login),
            web.post("/logout", login.logout),
            web.get("/enrol", enrolment.enrol_page),
            web.post("/enrol/check", enrolment.check),
            web.post("/enrol", enrolment.enrol),
            web.get("/static/console.js", script),
            web.get("/static/console.css", stylesheet),
        ]
    )
    app.cleanup_ctx.append(_running)
    app.on_shutdown.append(_end_streams)
    return app


async def _end_streams(app: web.Application) -> None:
    if app[CONSOLE].live is not None:
        app[CONSOLE].live.end_streams()


async def _running(app: web.Application) -> AsyncIterator[None]:
    console = app[CONSOLE]
    await console.pool.open()
    console.live = live.Live(console.settings.database_url, console.pool)
    console.live.start()
    yield
    await console.live.stop()
    await console.pool.close()


def serve(settings: Settings, port: int) -> None:
    """Run the console on settings' host and `port` until stopped."""
    settings.require_infrastructure()
    pool = make_pool(settings.database_url, "console", max_size=8, autocommit=True)
    publisher = Publisher(settings)
    console = Console(settings, pool, publisher, port)
    print(f"console    http://{settings.console_host}:{port}/", flush=True)
    try:
        web.run_app(make_app(console), host=settings.console_host, port=port, print=None, shutdown_timeout=5.0)
    finally:
        publisher.close()
