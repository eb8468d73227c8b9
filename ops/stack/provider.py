"""The demo provider: the "external" email and payment service the HTTP tools call.

A real HTTP server on 127.0.0.1 with its own ledger (SQLite, apart from toolgate's Postgres),
so tests can count effects where they happen. It behaves as a careful provider does:
  * bearer-token auth (the token is a secret toolgate resolves by reference);
  * `Idempotency-Key` required on writes: the same key and body return the stored response,
    the same key with another body is refused (422);
  * `GET /v1/operations/{key}` answers what became of a key (the status query).
Besides one email (`/v1/emails`) and one charge (`/v1/charges`) it sends emails in bulk
(`/v1/emails/bulk`: each message an item of its own, stored under the call's key and its index,
so a message is sent once however often the bulk is sent; one answer per item) and publishes an
announcement in two steps (`/v1/announcements`: the post, committed, then the subscribers'
emails; when the second fails the post stays, and `/v1/announcements/retract` undoes it).
`/_control/*` lets tests inject faults (delays after the effect committed, failing statuses with
a Retry-After, recipients that bounce, a second step that fails) and read the ledger.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import secrets
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

SCHEMA = """
CREATE TABLE IF NOT EXISTS operations (
    idempotency_key TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    response TEXT NOT NULL,
    created_at REAL NOT NULL
)
"""


@dataclass
class Faults:
    delay_before_ms: int = 0  # before the effect: the call times out with nothing done
    delay_after_ms: int = 0  # after the effect committed: the call times out, effect done
    fail_statuses: list[int] = field(default_factory=list)  # answered before any effect
    status_query_status: int = 0  # when set, the status query answers this (e.g. 503)
    echo_credentials: bool = False  # a leaky provider: put the Authorization header in answers
    retry_after_s: int = 1  # the Retry-After of an injected 429 or 503
    bounce: list[str] = field(default_factory=list)  # recipients a bulk send fails for
    fail_notify: bool = False  # an announcement's second step (the emails) fails


class Provider:
    def __init__(self, ledger: Path, token: str) -> None:
        ledger.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(str(ledger), isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute(SCHEMA)
        self.token = token
        self.faults = Faults()

    def authorized(self, request: web.Request) -> bool:
        return secrets.compare_digest(request.headers.get("Authorization", ""), f"Bearer {self.token}")

    async def write(self, request: web.Request, kind: str) -> web.Response:
        if not self.authorized(request):
            return web.json_response({"error": "unauthorized"}, status=401)
        key = request.headers.get("Idempotency-Key", "")
        if not key:
            return web.json_response({"error": "Idempotency-Key header is required"}, status=400)
        try:
            body = await request.json()
        except json.JSONDecodeError:
            return web.json_response({"error": "body is not JSON"}, status=400)
        if self.faults.fail_statuses:
            status = self.faults.fail_statuses.pop(0)
            wait = {"Retry-After": str(self.faults.retry_after_s)} if status in (429, 503) else None
            return web.json_response({"error": "injected failure"}, status=status, headers=wait)
        if self.faults.delay_before_ms:
            await asyncio.sleep(self.faults.delay_before_ms / 1000)
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        row = self.db.execute(
            "SELECT request_hash, response FROM operations WHERE idempotency_key = ?", (key,)
        ).fetchone()
        if row is not None:
            if row[0] != digest:
                return web.json_response({"error": "idempotency key reused with a different payload"}, status=422)
            return web.json_response(json.loads(row[1]), headers={"Idempotent-Replayed": "true"})
        response = self.effect(kind, body, key)
        if self.faults.echo_credentials:
            response["debug"] = {"authorization": request.headers.get("Authorization", "")}
        self.db.execute(
            "INSERT INTO operations VALUES (?, ?, ?, ?, ?)", (key, kind, digest, json.dumps(response), time.time())
        )
        if self.faults.delay_after_ms:
            await asyncio.sleep(self.faults.delay_after_ms / 1000)
        return web.json_response(response, status=201)

    def effect(self, kind: str, body: dict[str, Any], key: str) -> dict[str, Any]:
        if kind == "email":
            return {"message_id": f"msg_{secrets.token_hex(8)}", "status": "sent"}
        if kind == "bulk":
            return {"results": [self.item(key, n, message) for n, message in enumerate(body.get("messages", []))]}
        if kind == "announcement_request":
            return self.announce(key, body)
        if kind == "retraction":
            self.db.execute(
                "UPDATE operations SET kind = 'retracted' WHERE idempotency_key = ?", (f"post:{body.get('post_id')}",)
            )
            return {"post_id": body.get("post_id"), "status": "retracted"}
        return {
            "charge_id": f"ch_{secrets.token_hex(8)}",
            "status": "succeeded",
            "amount_cents": body.get("amount_cents"),
            "currency": body.get("currency"),
        }

    def item(self, key: str, index: int, message: dict[str, Any]) -> dict[str, Any]:
        """One message of a bulk send, once per (key, index): a bounce is answered and not stored."""
        if message.get("to") in self.faults.bounce:
            error = {"code": "recipient_rejected", "message": "the recipient's server refused the message"}
            return {"index": index, "to": message.get("to"), "ok": False, "error": error}
        item_key = f"{key}:{index}"
        row = self.db.execute("SELECT response FROM operations WHERE idempotency_key = ?", (item_key,)).fetchone()
        if row is None:
            sent = {"index": index, "to": message.get("to"), "ok": True, "message_id": f"msg_{secrets.token_hex(8)}"}
            self.store(item_key, "email", sent)
            return sent
        return json.loads(row[0])  # type: ignore[no-any-return]

    def announce(self, key: str, body: dict[str, Any]) -> dict[str, Any]:
        """Two steps: the post (committed at once), then the subscribers' emails."""
        post_id = f"post_{hashlib.sha256(key.encode()).hexdigest()[:16]}"
        self.store(f"post:{post_id}", "announcement", {"post_id": post_id, "title": body.get("title")})
        steps: list[dict[str, Any]] = [{"step": "post", "ok": True}]
        if self.faults.fail_notify:
            error = {"code": "mail_relay_down", "message": "the subscribers' emails could not be sent"}
            steps.append({"step": "notify", "ok": False, "error": error})
        else:
            steps.append({"step": "notify", "ok": True})
        return {"post_id": post_id, "steps": steps}

    def store(self, key: str, kind: str, response: dict[str, Any]) -> None:
        self.db.execute(
            "INSERT OR IGNORE INTO operations VALUES (?, ?, '', ?, ?)", (key, kind, json.dumps(response), time.time())
        )

    async def bulk(self, request: web.Request) -> web.Response:
        return await self.write(request, "bulk")

    async def announcements(self, request: web.Request) -> web.Response:
        return await self.write(request, "announcement_request")

    async def retractions(self, request: web.Request) -> web.Response:
        return await self.write(request, "retraction")

    async def emails(self, request: web.Request) -> web.Response:
        return await self.write(request, "email")

    async def charges(self, request: web.Request) -> web.Response:
        return await self.write(request, "charge")

    async def operation(self, request: web.Request) -> web.Response:
        if not self.authorized(request):
            return web.json_response({"error": "unauthorized"}, status=401)
        if self.faults.status_query_status:
            return web.json_response({"error": "injected failure"}, status=self.faults.status_query_status)
        key = request.match_info["key"]
        row = self.db.execute("SELECT kind, response FROM operations WHERE idempotency_key = ?", (key,)).fetchone()
        if row is None:
            return web.json_response({"status": "unknown"}, status=404)
        return web.json_response({"status": "completed", "kind": row[0], "response": json.loads(row[1])})

    async def control_faults(self, request: web.Request) -> web.Response:
        if not self.authorized(request):
            return web.json_response({"error": "unauthorized"}, status=401)
        body = await request.json()
        self.faults = Faults(
            int(body.get("delay_before_ms", 0)),
            int(body.get("delay_after_ms", 0)),
            [int(s) for s in body.get("fail_statuses", [])],
            int(body.get("status_query_status", 0)),
            bool(body.get("echo_credentials", False)),
            int(body.get("retry_after_s", 1)),
            [str(r) for r in body.get("bounce", [])],
            bool(body.get("fail_notify", False)),
        )
        return web.json_response({"ok": True})

    async def control_ledger(self, request: web.Request) -> web.Response:
        if not self.authorized(request):
            return web.json_response({"error": "unauthorized"}, status=401)
        rows = self.db.execute("SELECT idempotency_key, kind, response FROM operations ORDER BY created_at").fetchall()
        counts: dict[str, int] = {}
        for _, kind, _ in rows:
            counts[kind] = counts.get(kind, 0) + 1
        return web.json_response(
            {
                "counts": counts,
                "operations": [
                    {"idempotency_key": k, "kind": kind, "response": json.loads(resp)} for k, kind, resp in rows
                ],
            }
        )

    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    def app(self) -> web.Application:
        app = web.Application()
        app.add_routes(
            [
                web.post("/v1/emails", self.emails),
                web.post("/v1/charges", self.charges),
                web.post("/v1/emails/bulk", self.bulk),
                web.post("/v1/announcements", self.announcements),
                web.post("/v1/announcements/retract", self.retractions),
                web.get("/v1/operations/{key}", self.operation),
                web.post("/_control/faults", self.control_faults),
                web.get("/_control/ledger", self.control_ledger),
                web.get("/healthz", self.health),
            ]
        )
        return app


def serve(port: int, ledger: Path, token: str, host: str = "127.0.0.1") -> None:
    web.run_app(Provider(ledger, token).app(), host=host, port=port, print=None, access_log=None)
