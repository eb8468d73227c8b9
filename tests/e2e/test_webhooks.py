"""A tenant's webhook through the running `toolgate up` (issue 52, part 6): set with `toolgate
webhooks set`, it hears a held e-mail's ticket open, alice's vote and the ticket close, each POST
signed by the deployment key the runtime publishes (verified as a receiver would, with the
Standard Webhooks content); `webhooks deliveries` and `webhooks list` show them, the endpoint by
its origin only; the attempts are in the audit log."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from toolgate.trust import webhook_signing

from ..conftest import Pipeline
from .test_approver_tenants import ok
from .test_gates import Approvers, packet_of
from .test_pipeline import _approval_of, taxonomy

pytestmark = pytest.mark.timeout(240)
Received = list[tuple[dict[str, str], bytes]]


@contextmanager
def receiver() -> Iterator[tuple[str, Received]]:
    got: Received = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["content-length"]))
            got.append(({k.lower(): v for k, v in self.headers.items()}, body))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *_: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook/T0-secret-token", got
    finally:
        server.shutdown()
        server.server_close()


def events_of(got: Received, approval_id: str, public: list[bytes]) -> list[dict[str, object]]:
    found = []
    for headers, body in list(got):
        assert webhook_signing.verified(public, headers, body, int(time.time())), headers
        event = json.loads(body)
        if event["data"]["approval_id"] == approval_id:
            found.append(event)
    return found


def test_a_tenant_webhook_hears_a_ticket_open_a_vote_and_the_close_signed_by_the_deployment(
    pipeline: Pipeline,
) -> None:
    public = [bytes.fromhex(k) for k in pipeline.runtime["deployment_public_keys"]]
    with receiver() as (url, got):
        said = ok(pipeline.cli("webhooks", "set", "acme", url, "--as", "ops-lead")).stdout
        try:
            email = {"to": "ap@acme.example", "subject": "Webhook", "body": f"id {uuid.uuid4().hex[:8]}"}
            sent = pipeline.propose("notify.send_email", email, idempotency_key=f"wh-{uuid.uuid4().hex[:8]}")
            approval_id = _approval_of(pipeline, sent)
            deadline = time.monotonic() + 30
            while not events_of(got, approval_id, public) and time.monotonic() < deadline:
                time.sleep(0.1)
            [opened] = events_of(got, approval_id, public)
            assert opened["type"] == "approval.opened"
            card = f"{pipeline.refresh_runtime()['console_url']}/approvals/{approval_id}"
            assert opened["data"]["console_url"] == card  # the card in the console `toolgate up` started
            approvers = Approvers(pipeline)
            try:
                approvers.decide(packet_of(pipeline, approval_id), "alice")
            finally:
                approvers.close()
            assert taxonomy(pipeline.wait(sent)) == "SUCCESS"
            while len(events_of(got, approval_id, public)) < 3 and time.monotonic() < deadline + 30:
                time.sleep(0.1)
            events = events_of(got, approval_id, public)
            assert [e["type"] for e in events] == ["approval.opened", "approval.voted", "approval.closed"]
            assert events[1]["data"]["approver_id"] == "alice"  # type: ignore[index]
            assert events[2]["data"]["status"] == "APPROVED"  # type: ignore[index]
            listed = json.loads(ok(pipeline.cli("webhooks", "deliveries", "--tenant", "acme", "--json")).stdout)
            mine = [d for d in listed if d["approval"] == approval_id]
            assert sorted((d["event"], d["status"]) for d in mine) == [
                ("approval.closed", "delivered"),
                ("approval.opened", "delivered"),
                ("approval.voted", "delivered"),
            ]
            [hook] = [
                w for w in json.loads(ok(pipeline.cli("webhooks", "list", "--json")).stdout) if w["tenant"] == "acme"
            ]
            assert hook["endpoint"] == url.split("/hook")[0] and hook["enabled"]
            audited = pipeline.sql(
                "SELECT count(*) FROM toolgate.audit_log WHERE stage = 'webhooks' AND action = 'webhook_delivered' "
                "AND detail->>'approval_id' = %s",
                (approval_id,),
            )
            assert audited == [(3,)]
            assert "T0-secret-token" not in said + ok(pipeline.cli("webhooks", "list")).stdout
            leaked = "SELECT count(*) FROM toolgate.audit_log WHERE detail::text LIKE '%%T0-secret-token%%'"
            assert pipeline.sql(leaked) == [(0,)]
        finally:
            ok(pipeline.cli("webhooks", "remove", "acme"))
