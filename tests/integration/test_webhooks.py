"""A tenant's webhook on the real Postgres, posted to a real HTTP server on loopback (issue 52,
part 6): the approval tables' triggers write a delivery in the transaction that opens, votes on or
closes a ticket, and only for a tenant with an enabled endpoint; the courier posts each signed by
the deployment key (Standard Webhooks), in order, retries a failure on its schedule, disables an
endpoint that answers 410, drops what a removed endpoint left, and audits every attempt."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from aiohttp import web

from toolgate.ops.webhooks import remove_webhook, set_webhook
from toolgate.settings import Settings
from toolgate.trust import webhook_signing
from toolgate.trust.deployment_keys import deployment_keys
from toolgate.workers.webhooks.courier import Courier

from .conftest import Database
from .loopback_provider import free_port
from .test_redrive import _ticket


@dataclasses.dataclass
class Receiver:
    url: str
    answers: list[int]  # what to answer, in turn; 200 once they run out
    got: list[tuple[dict[str, str], bytes]] = dataclasses.field(default_factory=list)


@asynccontextmanager
async def receiving(answers: list[int]) -> AsyncIterator[Receiver]:
    port = free_port()
    receiver = Receiver(f"http://127.0.0.1:{port}/hooks/secret-path-token", list(answers))

    async def hook(request: web.Request) -> web.Response:
        receiver.got.append(({k.lower(): v for k, v in request.headers.items()}, await request.read()))
        return web.Response(status=receiver.answers.pop(0) if receiver.answers else 200)

    app = web.Application()
    app.router.add_post("/hooks/{token}", hook)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield receiver
    finally:
        await runner.cleanup()


def courier_settings(database: Database) -> Settings:
    return dataclasses.replace(database.settings, console_url="https://console.example")


def deliveries(database: Database, approval_id: str) -> list[tuple[Any, ...]]:
    return database.sql(
        "SELECT event_type, status, attempts, last_outcome FROM toolgate.webhook_deliveries "
        "WHERE approval_id = %s ORDER BY delivery_id",
        (approval_id,),
    )


def audited(database: Database, approval_id: str) -> list[tuple[Any, ...]]:
    return database.sql(
        "SELECT action, detail->>'event', detail->>'endpoint' FROM toolgate.audit_log "
        "WHERE stage = 'webhooks' AND detail->>'approval_id' = %s ORDER BY id",
        (approval_id,),
    )


def open_vote_close(database: Database) -> str:
    approval_id = f"appr_wh{uuid.uuid4().hex[:10]}"
    with psycopg.connect(database.database_url, autocommit=True) as conn:
        _ticket(conn, approval_id, "PENDING", None)
        conn.execute(
            "INSERT INTO toolgate.approval_decisions (decision_id, approval_id, approver_id, verdict, reason, "
            "decided_at) VALUES (%s, %s, 'carol', 'DENY', 'not this week', now())",
            (f"dec_{approval_id}", approval_id),
        )
        conn.execute(
            "UPDATE toolgate.approvals SET status = 'DENIED', decided_at = now() WHERE approval_id = %s", (approval_id,)
        )
    return approval_id


async def deliver(settings: Settings) -> int:
    courier = Courier(settings, timeout_s=2.0)
    await courier.pool.open()
    try:
        return await courier.deliver_once()
    finally:
        await courier.close()


def test_a_tenant_hears_its_ticket_open_gather_a_vote_and_close_signed_by_the_deployment(database: Database) -> None:
    settings = courier_settings(database)

    async def run() -> Receiver:
        async with receiving([]) as receiver:
            await asyncio.to_thread(set_webhook, settings, "acme", receiver.url, "ops-lead")
            approval_id = open_vote_close(database)
            assert [row[:2] for row in deliveries(database, approval_id)] == [
                ("approval.opened", "pending"),
                ("approval.voted", "pending"),
                ("approval.closed", "pending"),
            ]
            await deliver(settings)
            assert [row[:3] for row in deliveries(database, approval_id)] == [
                ("approval.opened", "delivered", 1),
                ("approval.voted", "delivered", 1),
                ("approval.closed", "delivered", 1),
            ]
            origin = receiver.url.split("/hooks")[0]
            assert audited(database, approval_id) == [
                ("webhook_delivered", "approval.opened", origin),
                ("webhook_delivered", "approval.voted", origin),
                ("webhook_delivered", "approval.closed", origin),
            ]
            return receiver

    receiver = asyncio.run(run())
    public = deployment_keys(settings).public_keys()
    bodies = []
    for headers, body in receiver.got[-3:]:
        assert webhook_signing.verified(public, headers, body, int(time.time())), headers
        bodies.append(json.loads(body))
    opened, voted, closed = bodies
    assert [b["type"] for b in bodies] == ["approval.opened", "approval.voted", "approval.closed"]
    approval_id = opened["data"]["approval_id"]
    assert opened["data"]["tool_name"] == "notify.send_email" and opened["data"]["required_approvals"] == 1
    assert opened["data"]["console_url"] == f"https://console.example/approvals/{approval_id}"
    assert (voted["data"]["approver_id"], voted["data"]["verdict"], voted["data"]["reason"]) == (
        "carol",
        "DENY",
        "not this week",
    )
    assert closed["data"]["status"] == "DENIED"
    assert "arguments" not in json.dumps(bodies)  # the call's arguments stay behind the console's login
    registered = database.sql(
        "SELECT action, actor, detail->>'endpoint' FROM toolgate.audit_log "
        "WHERE action = 'webhook_set' ORDER BY id DESC LIMIT 1"
    )
    assert registered == [("webhook_set", "ops-lead", receiver.url.split("/hooks")[0])]  # never the path's token


def test_a_failed_attempt_is_tried_again_later_and_each_attempt_is_audited(database: Database) -> None:
    settings = courier_settings(database)

    async def run() -> str:
        async with receiving([500, 503]) as receiver:
            await asyncio.to_thread(set_webhook, settings, "acme", receiver.url)
            approval_id = f"appr_wh{uuid.uuid4().hex[:10]}"
            with psycopg.connect(database.database_url, autocommit=True) as conn:
                _ticket(conn, approval_id, "PENDING", None)
            await deliver(settings)
            [(event, status, attempts, outcome)] = deliveries(database, approval_id)
            assert (event, status, attempts, outcome) == ("approval.opened", "pending", 1, "HTTP 500")
            waits = database.sql(
                "SELECT extract(epoch FROM due_at - now()) FROM toolgate.webhook_deliveries WHERE approval_id = %s",
                (approval_id,),
            )
            assert 3.0 < float(waits[0][0]) < 6.0  # the schedule's first wait, 5 s and jitter
            assert await deliver(settings) == 0  # not due yet
            for _ in range(2):
                database.sql(
                    "UPDATE toolgate.webhook_deliveries SET due_at = now() WHERE approval_id = %s", (approval_id,)
                )
                await deliver(settings)
            assert deliveries(database, approval_id) == [("approval.opened", "delivered", 3, "HTTP 200")]
            assert len({headers["webhook-id"] for headers, _ in receiver.got}) == 1  # one event, one id
            return approval_id

    approval_id = asyncio.run(run())
    assert [row[0] for row in audited(database, approval_id)] == [
        "webhook_attempt_failed",
        "webhook_attempt_failed",
        "webhook_delivered",
    ]


def test_410_disables_the_endpoint_and_a_removed_endpoint_leaves_nothing_to_deliver(database: Database) -> None:
    settings = courier_settings(database)

    async def run() -> None:
        async with receiving([410]) as receiver:
            await asyncio.to_thread(set_webhook, settings, "acme", receiver.url)
            gone = f"appr_wh{uuid.uuid4().hex[:10]}"
            with psycopg.connect(database.database_url, autocommit=True) as conn:
                _ticket(conn, gone, "PENDING", None)
            await deliver(settings)
            assert deliveries(database, gone)[0][1] == "failed"
            assert database.sql("SELECT enabled FROM toolgate.webhooks WHERE tenant_id = 'acme'") == [(False,)]
            after = open_vote_close(database)
            assert deliveries(database, after) == []  # a disabled endpoint is written nothing
            await asyncio.to_thread(set_webhook, settings, "acme", receiver.url)  # set again: enabled
            pending = f"appr_wh{uuid.uuid4().hex[:10]}"
            with psycopg.connect(database.database_url, autocommit=True) as conn:
                _ticket(conn, pending, "PENDING", None)
            assert await asyncio.to_thread(remove_webhook, settings, "acme")
            await deliver(settings)
            assert [row[1] for row in deliveries(database, pending)] == ["dropped"]
            assert [row[0] for row in audited(database, pending)] == ["webhook_dropped"]

    asyncio.run(run())
