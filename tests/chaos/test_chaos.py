"""Exactly once through crashes, retries and redeliveries.

5,000 calls mix invoice.create_draft (a Postgres effect) and payment.charge_card (an HTTP
effect at the demo provider, approved by two approvers through the approval topic); every
proposal is published twice. Meanwhile the execution worker and the outbox relay are killed
with SIGKILL at random moments (toolgate up restarts them) and Postgres is restarted once.
Only invariants are checked at the end: one invoice or charge per logical operation, counted
in Postgres and in the provider's own ledger; an observation for every proposal; no key left
PENDING once reconciliation has run. The counts are printed.

This test owns its broker and Postgres (to restart Postgres) and runs `toolgate up` against
them, as a deployment on external infrastructure would.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest
from confluent_kafka import Consumer, TopicPartition

from toolgate.agent_keys import AgentKeyring
from toolgate.contracts.policy import load_policy
from toolgate.hashing import provider_key
from toolgate.integrity import EdgeVerifier
from toolgate.ops.embedded import start_broker, start_postgres
from toolgate.schemas.codec import codec
from toolgate.schemas.models import Observation
from toolgate.signing import Keyring
from toolgate.topics.catalog import Topics
from toolgate.topics.client import ApprovalClient, ToolgateClient
from toolgate.topics.headers import CALL_ID, header

from ..conftest import TEST_ENV, _wait_up

pytestmark = pytest.mark.timeout(900)

CALLS = 5000
CHARGE_SHARE = 0.2
DRAFT = {
    "customer_id": "cust_acme01",
    "currency": "USD",
    "due_date": "2030-12-31",
    "lines": [{"description": "chaos", "quantity": 1, "unit_amount_cents": 100}],
}
CHARGE = {"amount_cents": 125000, "currency": "USD"}  # each charge settles an invoice of its own
SCOPES = ["invoices:write", "payments:charge"]


class Observer(threading.Thread):
    """Collects every final observation on acme's observation topic, by call_id; each must carry
    the deployment's signature."""

    def __init__(self, bootstrap: str, public_key: bytes) -> None:
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.verifier = EdgeVerifier(public_key)
        self.final: dict[str, list[str]] = {}
        self.unsigned = 0
        self.stop = threading.Event()

    def run(self) -> None:
        topic = Topics().name("observations", "acme")
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"chaos-{uuid.uuid4().hex[:6]}",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        while not self.stop.is_set():
            for msg in consumer.consume(500, 0.2):
                if msg.error():
                    continue
                if not self.verifier.ok(topic, msg.key(), msg.headers() or [], msg.value() or b""):
                    self.unsigned += 1
                    continue
                status = codec().decode(msg.value() or b"", Observation).status
                if status.code != 202:
                    self.final.setdefault(header(msg.headers(), CALL_ID) or "", []).append(str(status.taxonomy_class))
        consumer.close()


class Approver(threading.Thread):
    """An approval service: both finance controllers approve every chaos charge."""

    def __init__(self, bootstrap: str, home: Path, public_key: bytes) -> None:
        super().__init__(daemon=True)
        self.client = ApprovalClient(bootstrap, client_id="chaos-approver", deployment_public_key=public_key)
        self.keys = {name: Keyring(home / "approvers").load(name) for name in ("alice", "bob")}
        self.decided = 0
        self.stop = threading.Event()

    def run(self) -> None:
        seen: set[str] = set()
        try:
            for packet, traceparent in self.client.requests(["acme"], follow=True, stop=self.stop):
                if not packet.run_id.startswith("chaos-") or packet.approval_id in seen:
                    continue
                seen.add(packet.approval_id)
                for name, key in self.keys.items():
                    self.client.decide(packet, approver_id=name, key=key, approve=True, traceparent=traceparent)
                    self.decided += 1
        finally:
            self.client.close()


def _provider_ledger(home: Path, runtime: dict[str, Any]) -> list[dict[str, Any]]:
    token = (home / "secrets" / "demo-provider-token").read_text().strip()
    request = urllib.request.Request(
        runtime["endpoints"]["demo_provider"] + "/_control/ledger", headers={"Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())["operations"]  # type: ignore[no-any-return]


def _policy_granting_charges(path: Path) -> Path:
    """The shipped policy, with acme granted the charge rate this test offers (the contract allows 100 a minute)."""
    document = load_policy().document
    document["rate_limits"] = {"grants": {"acme": {"payment.charge_card": {"window_sec": 60, "max_requests": CALLS}}}}
    path.write_text(json.dumps(document))
    return path


def test_exactly_once_under_chaos(tmp_path: Path) -> None:
    broker = start_broker(tmp_path / "broker.log")
    pg = start_postgres(tmp_path / "pgdata", tmp_path / "postgres.log")
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLGATE_")}
    env.update(
        TEST_ENV,
        TOOLGATE_HOME=str(home),
        TOOLGATE_POLICY_FILE=str(_policy_granting_charges(tmp_path / "policy.json")),
        TOOLGATE_KAFKA_BOOTSTRAP=broker.bootstrap,
        TOOLGATE_DATABASE_URL=pg.url,
        TOOLGATE_LOG_LEVEL="WARNING",
    )
    home.mkdir()
    log = home / "up.out"
    with open(log, "wb") as out:
        up = subprocess.Popen(
            [sys.executable, "-m", "toolgate.cli", "up", "--partitions", "4"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    observer = approver = None
    kills: Counter[str] = Counter()
    try:
        _wait_up(log, up, 180.0)
        with psycopg.connect(pg.url, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO demo.invoices (invoice_id, tenant_id, customer_id, status, currency, amount_cents) "
                "SELECT 'inv_chaos' || lpad(i::text, 5, '0'), 'acme', 'cust_acme02', 'open', 'USD', 125000 "
                "FROM generate_series(0, %s) AS i",
                (CALLS,),
            )
        runtime = json.loads((home / "runtime.json").read_text())
        public_key = bytes.fromhex(runtime["deployment_public_key"])
        observer, approver = Observer(broker.bootstrap, public_key), Approver(broker.bootstrap, home, public_key)
        observer.start()
        approver.start()
        client = ToolgateClient(
            broker.bootstrap, client_id="chaos", keyring=AgentKeyring(home / "agents"), deployment_public_key=public_key
        )
        traffic, monkey = random.Random(20261122), random.Random(1122)
        operations: dict[str, tuple[str, str]] = {}  # call_id -> (tool, idempotency key)
        started = time.monotonic()

        def publish() -> None:
            for i in range(CALLS):
                charge = traffic.random() < CHARGE_SHARE
                tool, arguments = (
                    ("payment.charge_card", {**CHARGE, "invoice_id": f"inv_chaos{i:05d}"})
                    if charge
                    else ("invoice.create_draft", DRAFT)
                )
                key = f"chaos-{uuid.uuid4().hex}"
                sent = client.propose(
                    tool,
                    arguments,
                    agent_id="cli",
                    user_id="chaos",
                    scopes=SCOPES,
                    run_id=f"chaos-{i % 97}",
                    idempotency_key=key,
                    flush=False,
                )
                operations[sent.call_id] = (tool, key)
                if i % 250 == 0:
                    client.flush()
                    time.sleep(0.5)  # an offered rate, so the chaos meets the traffic
            client.flush()

        publisher = threading.Thread(target=publish, daemon=True)
        publisher.start()
        # The chaos runs on the main thread: a process's parent-death signal is tied to the
        # thread that spawned it, and the restarted Postgres must outlive this schedule.
        schedule = sorted(monkey.uniform(3, 45) for _ in range(7))
        pg_restart_at = monkey.uniform(12, 30)
        for at in schedule:
            while time.monotonic() - started < at:
                if pg_restart_at and time.monotonic() - started >= pg_restart_at:
                    pg.restart()
                    kills["postgres restart"] += 1
                    pg_restart_at = 0
                time.sleep(0.05)
            stage = monkey.choice(["execution", "execution", "outbox-relay"])
            pid = json.loads((home / "runtime.json").read_text())["workers"][stage]
            try:
                os.kill(pid, signal.SIGKILL)
                kills[stage] += 1
            except ProcessLookupError:
                pass
        publisher.join()
        # Every proposal published twice: replay the whole proposals topic's records as they were.
        republished = _republish_all(broker.bootstrap, client)
        deadline = time.monotonic() + 420
        while time.monotonic() < deadline and len(set(operations) & set(observer.final)) < len(operations):
            time.sleep(1.0)
        answered = set(operations) & set(observer.final)
        pending_deadline = time.monotonic() + 120
        while time.monotonic() < pending_deadline:
            with psycopg.connect(pg.url) as conn:
                [(pending,)] = conn.execute(
                    "SELECT count(*) FROM toolgate.idempotency_keys WHERE status = 'PENDING'"
                ).fetchall()
            if pending == 0:
                break
            time.sleep(1.0)
        elapsed = time.monotonic() - started
        with psycopg.connect(pg.url) as conn:
            invoices = dict(
                conn.execute(
                    "SELECT idempotency_key, count(*) FROM demo.invoices WHERE idempotency_key LIKE 'chaos-%' "
                    "GROUP BY idempotency_key"
                ).fetchall()
            )
            statuses = Counter(
                dict(
                    conn.execute(
                        "SELECT status, count(*) FROM toolgate.idempotency_keys WHERE idempotency_key LIKE 'chaos-%' "
                        "GROUP BY status"
                    ).fetchall()
                )
            )
            reconciled = Counter(
                dict(
                    conn.execute(
                        "SELECT action, count(*) FROM toolgate.audit_log WHERE stage = 'reconciliation' GROUP BY action"
                    ).fetchall()
                )
            )
            [(paid,)] = conn.execute(
                "SELECT count(*) FROM demo.invoices WHERE invoice_id LIKE 'inv_chaos%' AND status = 'paid'"
            ).fetchall()
        charged = Counter(op["idempotency_key"] for op in _provider_ledger(home, runtime) if op["kind"] == "charge")
        # The provider sees each caller's key bound to its tenant, tool and version.
        ledger = {
            key: charged[provider_key("acme", "payment.charge_card", "1.0.0", key)] for _, key in operations.values()
        }
        drafts = {k for t, k in operations.values() if t == "invoice.create_draft"}
        charges = {k for t, k in operations.values() if t == "payment.charge_card"}
        outcomes = Counter(t for call in answered for t in set(observer.final[call]))
        duplicates = sum(len(v) - 1 for c, v in observer.final.items() if c in operations)
        print(
            f"\nchaos: {len(operations)} proposals ({len(drafts)} drafts, {len(charges)} charges), "
            f"{republished} records republished, {elapsed:.0f} s\n"
            f"  kills: {dict(kills)}; restarts seen by toolgate up: "
            f"{log.read_text().count('restarting')}\n"
            f"  answered: {len(answered)}/{len(operations)}; final outcomes {dict(outcomes)}; "
            f"{duplicates} duplicate final observations (at-least-once delivery)\n"
            f"  invoices: {sum(invoices.values())} for {len(drafts)} draft operations; "
            f"charges in the provider's ledger: {sum(ledger[k] for k in charges)} for {len(charges)} operations, "
            f"{paid} invoices paid\n"
            f"  keys: {dict(statuses)}; reconciliation decisions: {dict(reconciled)}; "
            f"approvals decided: {approver.decided}"
        )
        assert answered == set(operations), f"{len(set(operations) - answered)} proposals without an observation"
        assert observer.unsigned == 0, "an observation without the deployment's signature"
        assert all(invoices.get(k) == 1 for k in drafts), "a draft operation without exactly one invoice"
        assert set(invoices) <= drafts
        assert all(ledger[k] == 1 for k in charges), "a charge operation without exactly one charge"
        assert "STALE_STATE" not in outcomes, "a call refused for the state its own effect left"
        assert paid == len(charges), "every charge settles its invoice, once"
        assert statuses.get("PENDING", 0) == 0
        assert kills["postgres restart"] == 1 and kills["execution"] + kills["outbox-relay"] == 7
    finally:
        for thread in (observer, approver):
            if thread is not None:
                thread.stop.set()
                thread.join(10)
        up.send_signal(signal.SIGTERM)
        try:
            up.wait(90)
        except subprocess.TimeoutExpired:
            up.kill()
        pg.stop()
        broker.stop()


def _republish_all(bootstrap: str, client: ToolgateClient) -> int:
    """Publish every record on tool.proposals a second time: same key, value and headers."""
    topic = Topics().proposals
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"chaos-dup-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False}
    )
    partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    seen: set[str] = set()
    count, idle = 0, time.monotonic()
    while time.monotonic() - idle < 3.0:
        for msg in consumer.consume(500, 0.2):
            if msg.error():
                continue
            idle = time.monotonic()
            call_id = header(msg.headers(), CALL_ID) or ""
            if call_id in seen:
                continue
            seen.add(call_id)
            client.publish_raw(topic, msg.key(), msg.value() or b"", list(msg.headers() or []))
            count += 1
    client.flush()
    consumer.close()
    return count
