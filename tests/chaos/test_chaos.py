"""Exactly once, and nothing lost, whatever dies.

Calls mix invoice.create_draft (a Postgres effect) and payment.charge_card (an HTTP effect at
the demo provider, approved by two approvers through the approval topic); every proposal is
published twice. Meanwhile, at random moments of the traffic, every worker process is
SIGKILLed at least once (execution and the relay more), Postgres is SIGKILLed (no clean stop:
it recovers from its WAL), the embedded broker is SIGKILLed (it comes back with no topics:
toolgate up re-drives from Postgres), and `toolgate up` as a whole is SIGKILLed and started
again on its home. The named crash points (toolgate/faults.py) fire too: after an HTTP effect
and before its record, after execution committed its results and before it published them,
after a stage produced and before its offsets, during an approval's release, during the
relay's publish. The agent's client waits for every call, re-publishing
what the chaos lost.

Only invariants are checked at the end, from Postgres, the provider's own ledger and the
clients: every call has a final observation and none has two different ones; one invoice or
charge per logical operation; no key left PENDING; every approval decided once, by both
approvers; the audit chain intact. The counts are printed. CI runs CALLS=3000; the long run is
`TOOLGATE_CHAOS_CALLS=20000 pytest -m chaos tests/chaos/test_chaos.py -s`, with
`TOOLGATE_CHAOS_TWINS=1` a second worker of every consuming stage beside toolgate up's (twins.py).
"""

from __future__ import annotations

import contextlib
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

from tests.unit.factories import draft_key
from toolgate.client import ApprovalClient, Proposed, ToolgateClient
from toolgate.contracts.budgets import load_budgets
from toolgate.contracts.cedar_policy import policy_files
from toolgate.kafka_security import ADMIN, APPROVALS, agent_role
from toolgate.schemas.codec import codec
from toolgate.schemas.hashing import provider_key
from toolgate.schemas.models import Observation
from toolgate.topics.catalog import Topics
from toolgate.topics.headers import CALL_ID, header
from toolgate.trust.agent_keys import AgentKeyring
from toolgate.trust.integrity import EdgeVerifier
from toolgate.trust.signing import Keyring

from ..conftest import _wait_up, kafka_config, session_broker, session_env
from . import twins as twin_workers
from .brokers import await_serving, kill_every_node, kill_leader, victims

# CI runs a bounded chaos; TOOLGATE_CHAOS_CALLS=20000 is the long run (README).
CALLS = int(os.environ.get("TOOLGATE_CHAOS_CALLS", "3000"))
pytestmark = pytest.mark.timeout(max(900, CALLS // 8))
STALL_S = 10.0  # no new answer for this long, yet calls unanswered: they were lost
WORKERS = ("validation", "policy", "approval-wait", "execution", "outbox-relay", "normalization", "reconciliation")
# Every named crash point (toolgate/faults.py), each with a chance small enough that toolgate
# up's restart backoff never grows long.
FAULTS = (
    "execution.after_http_effect=0.05,execution.after_commit=0.01,stage.after_produce=0.02,"
    "approval.during_release=0.06,relay.during_publish=0.02"
)
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
    """Collects every final observation on acme's observation topic, by call_id (as acme's agent
    reads it); each must carry the deployment's signature."""

    def __init__(self, bootstrap: str, public_key: bytes, kafka: dict[str, str]) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.kafka = bootstrap, kafka
        self.verifier = EdgeVerifier(public_key)
        self.final: dict[str, list[str]] = {}
        self.unsigned = 0
        self.stop = threading.Event()

    def run(self) -> None:
        topic = Topics().name("observations", "acme")
        consumer = Consumer(
            {
                **self.kafka,
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
        self.client = ApprovalClient(
            bootstrap,
            client_id="chaos-approver",
            deployment_public_key=public_key,
            kafka_config=kafka_config(home, APPROVALS),
        )
        self.keys = {name: Keyring(home / "approvers").load(name) for name in ("alice", "bob")}
        self.decided = 0
        self.stop = threading.Event()

    def run(self) -> None:
        # Every packet is decided, also one announced again: the decisions the broker lost
        # with it are made again, and one already counted is a no-op.
        try:
            for packet, traceparent in self.client.requests(["acme"], follow=True, stop=self.stop):
                if not packet.run_id.startswith("chaos-"):
                    continue
                for name, key in self.keys.items():
                    # A broker down past the flush's wait leaves the decision queued in the
                    # producer, delivered once it is back: not a reason for the service to stop.
                    with contextlib.suppress(RuntimeError):
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


def _policy_granting_charges(directory: Path) -> Path:
    """The shipped policy set, its budgets granting acme the charge rate this test offers (the
    contract allows 100 a minute)."""
    directory.mkdir()
    for source, text in policy_files():
        (directory / Path(source).name).write_text(text)
    document = load_budgets().document
    document["rate_limits"] = {"grants": {"acme": {"payment.charge_card": {"window_sec": 60, "max_requests": CALLS}}}}
    (directory / "budgets.json").write_text(json.dumps(document))
    return directory


def _up(home: Path, env: dict[str, str], runs: list[subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    log = home / f"up-{len(runs)}.out"
    with open(log, "wb") as out:
        up = subprocess.Popen(
            [sys.executable, "-m", "toolgate.cli", "up", "--partitions", "4"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    runs.append(up)
    _wait_up(log, up, 180.0)
    return up


def _kill(home: Path, victim: str) -> bool:
    """SIGKILL a worker or an embedded server by its pid in runtime.json; one that is down
    right now (restarting after an earlier kill) is waited for, a while."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        runtime = json.loads((home / "runtime.json").read_text())
        pid = runtime["infrastructure" if victim in ("postgres", "broker") else "workers"][victim]
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
            return True
        time.sleep(0.2)
    return False


def _schedule(monkey: random.Random, span: float, broker: str) -> list[tuple[float, str]]:
    """When to kill what: every worker once, execution and the relay again, Postgres, the
    broker (brokers.py), and toolgate up as a whole, at random moments of the traffic."""
    chosen = [*WORKERS, "execution", "execution", "outbox-relay", "postgres", *victims(broker), "toolgate up"]
    return sorted((monkey.uniform(3, span), victim) for _ in range(max(1, CALLS // 3000)) for victim in chosen)


def test_exactly_once_under_chaos(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    broker, nodes = session_broker()
    env = session_env(
        home,
        TOOLGATE_POLICY_DIR=str(_policy_granting_charges(tmp_path / "policy")),
        TOOLGATE_LOG_LEVEL="WARNING",
        TOOLGATE_FAULTS=FAULTS,
    )
    runs: list[subprocess.Popen[bytes]] = []
    observer = approver = None
    kills: Counter[str] = Counter()
    leader_changes = 0  # partitions whose leader a kill took away (on Kafka)
    twins = twin_workers.Twins(home)
    try:
        up = _up(home, env, runs)
        if twin_workers.ENABLED:
            twins.start()
        runtime = json.loads((home / "runtime.json").read_text())
        bootstrap, database_url = runtime["kafka_bootstrap"], runtime["database_url"]
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO demo.invoices (invoice_id, tenant_id, customer_id, status, currency, amount_cents) "
                "SELECT 'inv_chaos' || lpad(i::text, 5, '0'), 'acme', 'cust_acme02', 'open', 'USD', 125000 "
                "FROM generate_series(0, %s) AS i",
                (CALLS,),
            )
        public_key = bytes.fromhex(runtime["deployment_public_key"])
        agent, admin = kafka_config(home, agent_role("cli")), kafka_config(home, ADMIN)
        observer, approver = Observer(bootstrap, public_key, agent), Approver(bootstrap, home, public_key)
        observer.start()
        approver.start()
        client = ToolgateClient(
            bootstrap,
            client_id="chaos",
            keyring=AgentKeyring(home / "agents"),
            deployment_public_key=public_key,
            kafka_config=agent,
        )
        traffic, monkey = random.Random(20261122), random.Random(1122)
        operations: dict[str, tuple[str, str]] = {}  # call_id -> (tool, idempotency key)
        proposed: dict[str, Proposed] = {}
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
                proposed[sent.call_id] = sent
                if i % 250 == 0:
                    with contextlib.suppress(RuntimeError):  # the broker may be down: `wait` re-publishes
                        client.flush()
                    time.sleep(0.5)  # an offered rate, so the chaos meets the traffic
            with contextlib.suppress(RuntimeError):
                client.flush()

        publisher = threading.Thread(target=publish, daemon=True)
        publisher.start()
        # The chaos runs on the main thread: a process's parent-death signal is tied to the
        # thread that spawned it, and a restarted `toolgate up` must outlive this schedule.
        # A victim that stays down past `_kill`'s wait at its moment (its process exited and
        # toolgate up is still bringing the broker or Postgres back) is killed once more at the end.
        missed: list[str] = []
        for at, victim in _schedule(monkey, CALLS / 500 + 20, broker):
            while time.monotonic() - started < at:
                twins.tend()
                time.sleep(0.05)
            if victim == "toolgate up":
                up.send_signal(signal.SIGKILL)
                up.wait()
                kills[victim] += 1
                up = _up(home, env, runs)
            elif victim in ("leader", "leader+worker"):
                await_serving(bootstrap, admin, nodes)  # a leader among three serving nodes
                leader_changes += kill_leader(home, bootstrap, admin)
                kills[victim] += 1
                if victim == "leader+worker":  # during the election
                    worker = monkey.choice(WORKERS)
                    kills[worker] += _kill(home, worker)
            elif victim == "every broker":
                kills[victim] += kill_every_node(home, nodes) == nodes
            elif _kill(home, victim):
                kills[victim] += 1
            else:
                missed.append(victim)
        for victim in missed:
            kills[victim] += _kill(home, victim)
        publisher.join()
        # Every proposal published twice, byte for byte.
        for sent in proposed.values():
            client.resend(sent)
        with contextlib.suppress(RuntimeError):
            client.flush()
        republished = len(proposed)
        # The agent's client publishes again what has no final answer yet, as `wait` does
        # (test_restart.py waits call by call; here the observer collects the answers). Only
        # once answers stopped coming for STALL_S: while toolgate works through a backlog,
        # re-publishing all of it would only double the backlog.
        deadline, resent = time.monotonic() + 600, 0
        answered_before, quiet_since = -1, time.monotonic()
        while time.monotonic() < deadline and len(set(operations) & set(observer.final)) < len(operations):
            twins.tend()
            time.sleep(1.0)
            answered_now = len(set(operations) & set(observer.final))
            if answered_now != answered_before:
                answered_before, quiet_since = answered_now, time.monotonic()
                continue
            if time.monotonic() - quiet_since < STALL_S:
                continue
            for call_id in set(operations) - set(observer.final):
                client.resend(proposed[call_id])
                resent += 1
            with contextlib.suppress(RuntimeError):
                client.flush()
            quiet_since = time.monotonic()
        answered = set(operations) & set(observer.final)
        pending_deadline = time.monotonic() + 120
        while time.monotonic() < pending_deadline:
            with psycopg.connect(database_url) as conn:
                [(pending,)] = conn.execute(
                    "SELECT count(*) FROM toolgate.idempotency_keys WHERE status = 'PENDING'"
                ).fetchall()
            if pending == 0:
                break
            time.sleep(1.0)
        elapsed = time.monotonic() - started
        runtime = json.loads((home / "runtime.json").read_text())
        with psycopg.connect(database_url) as conn:
            # A draft stores its operation key (the caller's key bound to the tenant), not the key.
            stored = {draft_key(k): k for _, k in operations.values()}
            invoices = {
                stored.get(key, key): n
                for key, n in conn.execute(
                    "SELECT operation_key, count(*) FROM demo.invoices WHERE operation_key IS NOT NULL GROUP BY 1"
                ).fetchall()
            }
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
            approvals = conn.execute(
                "SELECT a.status, count(d.*) FILTER (WHERE d.verdict = 'APPROVE') FROM toolgate.approvals a "
                "LEFT JOIN toolgate.approval_decisions d USING (approval_id) WHERE a.run_id LIKE 'chaos-%' "
                "GROUP BY a.approval_id, a.status"
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
        split = [c for c, v in observer.final.items() if c in operations and len(set(v)) > 1]
        crashed = Counter(
            point for log in (home / "logs").glob("*.log") for point in _crash_points(log.read_text(errors="replace"))
        )
        restarts = sum((home / f"up-{n}.out").read_text().count("restarting") for n in range(len(runs)))
        verified = subprocess.run(
            [sys.executable, "-m", "toolgate.cli", "audit", "verify", "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        print(
            f"\nchaos on {broker} ({nodes} node(s)): {len(operations)} proposals ({len(drafts)} drafts, "
            f"{len(charges)} charges), "
            f"{republished} records republished, {resent} re-published for want of an answer, {elapsed:.0f} s\n"
            f"  kills: {dict(kills)}; leader changes forced: {leader_changes}; crash points reached: "
            f"{dict(crashed)}; restarts by toolgate up: {restarts}; "
            f"twins: {list(twins.started)} (restarted {twins.restarts()})\n"
            f"  answered: {len(answered)}/{len(operations)}; final outcomes {dict(outcomes)}; "
            f"{duplicates} duplicate final observations (at-least-once delivery), {len(split)} with two finals\n"
            f"  invoices: {sum(invoices.values())} for {len(drafts)} draft operations; "
            f"charges in the provider's ledger: {sum(ledger[k] for k in charges)} for {len(charges)} operations, "
            f"{paid} invoices paid\n"
            f"  keys: {dict(statuses)}; reconciliation decisions: {dict(reconciled)}; "
            f"approvals: {dict(Counter(approvals))} (status, approvals counted); audit: {verified.stdout.strip()}"
        )
        assert answered == set(operations), f"{len(set(operations) - answered)} proposals without an observation"
        assert not split, f"calls with two different final answers: {split[:5]}"
        assert observer.unsigned == 0, "an observation without the deployment's signature"
        assert all(invoices.get(k) == 1 for k in drafts), "a draft operation without exactly one invoice"
        assert set(invoices) <= drafts
        assert all(ledger[k] == 1 for k in charges), "a charge operation without exactly one charge"
        assert "STALE_STATE" not in outcomes, "a call refused for the state its own effect left"
        assert paid == len(charges), "every charge settles its invoice, once"
        assert statuses.get("PENDING", 0) == 0
        assert {row for row in approvals} <= {("APPROVED", 2)}, "an approval not decided once, by both approvers"
        assert verified.returncode == 0 and json.loads(verified.stdout)["verdict"] == "intact", verified.stdout
        assert all(kills[victim] >= 1 for victim in (*WORKERS, "postgres", *victims(broker), "toolgate up")), kills
        if broker == "kafka":  # a persistent cluster never needs healing from Postgres
            assert leader_changes >= 1, "no kill took a leader away"
            restarted = [(home / f"up-{n}.out").read_text() for n in range(1, len(runs))]
            assert not [said for said in restarted if "re-drive" in said], "toolgate up re-drove from Postgres"
            assert "re-drive" not in (home / "up-0.out").read_text().split("toolgate is up", 1)[1]
        assert sum(crashed.values()) >= 1, "no crash point fired"
    finally:
        twins.stop()
        for thread in (observer, approver):
            if thread is not None:
                thread.stop.set()
                thread.join(10)
        for up in runs:
            if up.poll() is None:
                up.send_signal(signal.SIGTERM)
                try:
                    up.wait(90)
                except subprocess.TimeoutExpired:
                    up.kill()


def _crash_points(text: str) -> list[str]:
    return [line.split("crash point ", 1)[1].split(":", 1)[0] for line in text.splitlines() if "crash point " in line]
