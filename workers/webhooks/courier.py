"""The webhook courier: posts the deliveries the approval tables' triggers write, signed, retried
and audited. It runs in the outbox-relay worker, beside the relay (workers/stages.py).

A round claims due deliveries under a lease (store/webhooks.py), posts them (a tenant's in
order, tenants side by side), and settles each with its audit entry in one transaction. The
body is the row's JSON, with the console card's link added where `console_url` is set, signed
at each attempt (workers/webhooks/delivery.py decides what follows an attempt;
toolgate/trust/webhook_signing.py signs). Redirects are not followed; an endpoint's reply body is
never read into a log or the audit log, and an endpoint is named there by its origin only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Iterable
from itertools import groupby
from typing import Any

import aiohttp
import orjson
import psycopg

from toolgate.settings import Settings
from toolgate.store import audit, webhooks
from toolgate.store.db import make_pool
from toolgate.store.notifications import listening, waking
from toolgate.store.webhooks import Due
from toolgate.trust import webhook_signing
from toolgate.trust.deployment_keys import deployment_keys
from toolgate.workers.webhooks.delivery import Attempt, judged, origin

log = logging.getLogger("toolgate.webhooks")
STAGE = "webhooks"
ACTOR = "webhook-courier"
LEASE_S = 60.0  # longer than an attempt may take: a claimed delivery is this courier's meanwhile
TIMEOUT_S = 10.0
BATCH = 50
IDLE_LOOK_S = 5.0
RETENTION_S = 7 * 86400.0  # finished deliveries kept for `toolgate webhooks deliveries`
PRUNE_EVERY_S = 3600.0


class Courier:
    def __init__(self, settings: Settings, timeout_s: float = TIMEOUT_S) -> None:
        self.settings = settings
        self.timeout_s = timeout_s
        self.pool = make_pool(settings.database_url, STAGE, max_size=2)
        self.keys = deployment_keys(settings)
        self.wakeup = asyncio.Event()
        self.http: aiohttp.ClientSession | None = None
        self._pruned = 0.0

    async def run(self) -> None:
        await self.pool.open()
        listen = listening(self.settings.database_url, webhooks.listen, waking(self.wakeup), log, STAGE)
        listener = asyncio.ensure_future(listen)
        try:
            while True:
                self.wakeup.clear()
                try:
                    moved = await self.deliver_once()
                    look = await self._next_due() if moved < BATCH else 0.0
                except Exception:
                    log.exception("webhook round failed", extra={"stage": STAGE, "action": "webhook_round_failed"})
                    look = 1.0
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.wakeup.wait(), look)
        finally:
            listener.cancel()
            await self.close()

    async def close(self) -> None:
        if self.http is not None:
            await self.http.close()
        await self.pool.close()

    async def deliver_once(self) -> int:
        """One round: claim the due deliveries, attempt each, settle each; how many were attempted."""
        async with self.pool.connection() as conn:
            due = await webhooks.claim(conn, BATCH, LEASE_S)
        by_tenant = [list(group) for _, group in groupby(sorted(due, key=_tenant_order), key=_tenant)]
        await asyncio.gather(*(self._in_order(deliveries) for deliveries in by_tenant))
        await self._prune()
        return len(due)

    async def _in_order(self, deliveries: Iterable[Due]) -> None:
        for due in deliveries:
            if due.url is None:
                await self._settle(due, "dropped", "the tenant's webhook was removed or disabled", None)
                continue
            next_ = judged(await self._post(due, due.url), due.attempts, random.random())
            await self._settle(due, next_.status, next_.outcome, due.url, next_.after_s, next_.disable_endpoint)

    async def _post(self, due: Due, url: str) -> Attempt:
        body = orjson.dumps(self._body(due))
        keys = [k.signing_key for k in self.keys.view().accepted.values()]  # the sealing key's first
        headers = webhook_signing.headers(keys, webhook_signing.message_id(due.delivery_id), int(time.time()), body)
        if self.http is None:
            self.http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout_s))
        try:
            async with self.http.post(url, data=body, headers=headers, allow_redirects=False) as reply:
                return reply.status
        except TimeoutError:
            return f"no answer within {self.timeout_s:g} s"
        except aiohttp.ClientError as exc:
            return f"no answer: {type(exc).__name__}"

    def _body(self, due: Due) -> dict[str, Any]:
        base = self.settings.console_url.rstrip("/")
        if not base:
            return due.body
        link = {"console_url": f"{base}/approvals/{due.approval_id}"}
        return {**due.body, "data": {**due.body.get("data", {}), **link}}

    async def _settle(
        self, due: Due, status: str, outcome: str, url: str | None, after_s: float = 0.0, disable: bool = False
    ) -> None:
        action = {"delivered": "webhook_delivered", "failed": "webhook_failed", "dropped": "webhook_dropped"}
        detail = {
            "delivery_id": due.delivery_id,
            "approval_id": due.approval_id,
            "event": due.event_type,
            "attempt": due.attempts,
            "outcome": outcome,
            "endpoint": None if url is None else origin(url),
        }
        if status == "pending":
            detail["retry_in_s"] = round(after_s, 1)
        entry = audit.Entry(STAGE, action.get(status, "webhook_attempt_failed"), ACTOR, None, due.tenant_id, detail)
        async with self.pool.connection() as conn, conn.transaction():
            await webhooks.settle(conn, due.delivery_id, status, outcome, after_s)
            if disable:
                await webhooks.disable(conn, due.tenant_id)
            await audit.append(conn, [entry])
        log.info("webhook %s", status, extra={"stage": STAGE, "action": entry.action, **detail})

    async def _next_due(self) -> float:
        try:
            async with self.pool.connection() as conn:
                due = await webhooks.next_due_s(conn)
        except psycopg.Error:
            return 1.0
        return IDLE_LOOK_S if due is None else min(IDLE_LOOK_S, max(0.0, due))

    async def _prune(self) -> None:
        now = time.monotonic()
        if now - self._pruned < PRUNE_EVERY_S:
            return
        self._pruned = now
        async with self.pool.connection() as conn:
            await webhooks.prune(conn, RETENTION_S)


def _tenant(due: Due) -> str:
    return due.tenant_id


def _tenant_order(due: Due) -> tuple[str, int]:
    return (due.tenant_id, due.delivery_id)
