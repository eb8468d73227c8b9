"""`toolgate up` SIGKILLed mid-traffic and started again on the same home: every call one
agent's client proposed gets its final answer through that same client, and every effect
happened once. On the session's broker: the embedded Tansu comes back empty (it keeps topics in
memory); Apache Kafka's nodes come back with their data.

What carries the calls across: the same ports (ports.json), so the client reconnects by
itself; `wait` re-publishing a call with no final answer; on the embedded broker, `toolgate up`
re-driving what Postgres holds in flight (approval packets still PENDING, outbox rows the broker
lost).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.unit.factories import draft_key
from toolgate.client import ApprovalClient, Proposed, ToolgateClient
from toolgate.kafka_security import APPROVALS, agent_role
from toolgate.schemas.hashing import provider_key
from toolgate.trust.agent_keys import AgentKeyring
from toolgate.trust.signing import Keyring

from ..conftest import _wait_up, kafka_config, session_env
from .test_chaos import DRAFT, _provider_ledger

pytestmark = pytest.mark.timeout(600)

DRAFTS = 300
EMAILS = 20
KILL_AFTER = 160  # proposals published before `toolgate up` is SIGKILLed


def _up(log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "toolgate.cli", "up", "--partitions", "2"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


class Carol(threading.Thread):
    """An approval service: carol approves every email of this test, once per packet."""

    def __init__(self, client: ApprovalClient, home: Path) -> None:
        super().__init__(daemon=True)
        self.client, self.key = client, Keyring(home / "approvers").load("carol")
        self.stop, self.decided = threading.Event(), 0

    def run(self) -> None:
        seen: set[str] = set()
        for packet, traceparent in self.client.requests(["acme"], follow=True, stop=self.stop):
            if packet.run_id.startswith("restart-") and packet.approval_id not in seen:
                seen.add(packet.approval_id)
                self.client.decide(packet, approver_id="carol", key=self.key, approve=True, traceparent=traceparent)
                self.decided += 1


def test_a_killed_toolgate_up_restarted_on_its_home_answers_every_call_once(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = session_env(home, TOOLGATE_LOG_LEVEL="WARNING")
    up = _up(home / "up.out", env)
    carol: Carol | None = None
    try:
        _wait_up(home / "up.out", up, 180.0)
        before = json.loads((home / "runtime.json").read_text())
        public_key = bytes.fromhex(before["deployment_public_key"])
        client = ToolgateClient(
            before["kafka_bootstrap"],
            client_id="restart",
            keyring=AgentKeyring(home / "agents"),
            deployment_public_key=public_key,
            kafka_config=kafka_config(home, agent_role("cli")),
        )
        sent: dict[str, tuple[Proposed, str, str]] = {}  # call_id -> (proposed, tool, idempotency key)
        for i in range(DRAFTS + EMAILS):
            tool, arguments = (
                ("notify.send_email", {"to": "ap@coyote.example", "subject": f"Reminder {i}", "body": "Please pay."})
                if i % ((DRAFTS + EMAILS) // EMAILS) == 0
                else ("invoice.create_draft", DRAFT)
            )
            key = f"restart-{uuid.uuid4().hex}"
            proposed = client.propose(
                tool,
                arguments,
                agent_id="cli",
                user_id="restart",
                run_id=f"restart-{i % 13}",
                idempotency_key=key,
                watch=i == 0,
                flush=False,
            )
            sent[proposed.call_id] = (proposed, tool, key)
            if i == KILL_AFTER:
                client.flush()
                time.sleep(1.0)  # calls in every stage, some effects done, emails waiting for carol
                up.send_signal(signal.SIGKILL)
                up.wait()
        # The rest were published into the client's buffer while nothing listened.
        up = _up(home / "up-again.out", env)
        _wait_up(home / "up-again.out", up, 180.0)
        after = json.loads((home / "runtime.json").read_text())
        assert after["kafka_bootstrap"] == before["kafka_bootstrap"], "the broker came back on another port"
        assert after["database_url"] == before["database_url"]
        approvals = ApprovalClient(
            after["kafka_bootstrap"],
            client_id="carol",
            deployment_public_key=public_key,
            kafka_config=kafka_config(home, APPROVALS),
        )
        carol = Carol(approvals, home)
        carol.start()

        start = time.monotonic()
        finals: dict[str, dict[str, Any]] = {}
        for call_id, (proposed, _, _) in sent.items():
            finals[call_id] = client.wait(proposed, timeout=max(30.0, 300 - (time.monotonic() - start))).as_json()
        outcomes = Counter((sent[c][1], o["status"]["taxonomy_class"]) for c, o in finals.items())
        replays = sum(1 for o in finals.values() if o["execution_metadata"]["idempotency_hit"])

        with psycopg.connect(after["database_url"]) as conn:
            # A draft stores its operation key (the caller's key bound to the tenant), not the key.
            stored = {draft_key(k): k for _, _, k in sent.values()}
            invoices = {
                stored.get(key, key): n
                for key, n in conn.execute(
                    "SELECT operation_key, count(*) FROM demo.invoices WHERE operation_key IS NOT NULL GROUP BY 1"
                ).fetchall()
            }
            pending = conn.execute("SELECT count(*) FROM toolgate.idempotency_keys WHERE status = 'PENDING'").fetchone()
        emailed = Counter(op["idempotency_key"] for op in _provider_ledger(home, after) if op["kind"] == "email")
        drafts = {k for _, t, k in sent.values() if t == "invoice.create_draft"}
        emails = {k for _, t, k in sent.values() if t == "notify.send_email"}
        restarted = (home / "up-again.out").read_text()
        print(
            f"\nrestart: {len(sent)} calls ({len(drafts)} drafts, {len(emails)} emails), killed after {KILL_AFTER}; "
            f"outcomes {dict(outcomes)}; {replays} answered from the idempotency record; "
            f"approvals decided by carol after the restart: {carol.decided}\n"
            + "\n".join(line for line in restarted.splitlines() if line.startswith("re-drive"))
        )
        assert set(outcomes) <= {("invoice.create_draft", "SUCCESS"), ("notify.send_email", "SUCCESS")}, outcomes
        assert all(invoices.get(k) == 1 for k in drafts), "a draft without exactly one invoice"
        assert set(invoices) == drafts
        ledger = {k: emailed[provider_key("acme", "notify.send_email", "1.0.0", k)] for k in emails}
        assert all(n == 1 for n in ledger.values()), f"an email not sent exactly once: {ledger}"
        assert pending == (0,)
        client.close()
    finally:
        if carol is not None:
            carol.stop.set()
            carol.join(10)
        up.send_signal(signal.SIGTERM)
        try:
            up.wait(90)
        except subprocess.TimeoutExpired:
            up.kill()
