"""The deployment secret rotated under load, through a real `toolgate up` of this module's own (a
rotation would disturb the tests that share the session's pipeline).

Calls flow all along (a thread proposes an invoice read and a draft invoice every 100 ms, and an
email each phase, which an approval service approves as its packet comes), while the secret is
rotated twice: step by step, as on many hosts (stage, promote, retire), then with one
`toolgate secret rotate --all`. Then: every call got exactly one final observation, nothing was
dead-lettered and no record audited as forged, the client (started knowing only the first key,
reading runtime.json as any client on the host does) took observations signed by each of the three
keys, each naming its key, and `toolgate audit verify` passes over checkpoints signed by all
three, each naming the key that signed it. No secret appears in runtime.json, logs, telemetry or
what the commands printed."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from toolgate.client import ApprovalClient, Observed, Proposed, ToolgateClient
from toolgate.kafka_security import ADMIN, APPROVALS, DOOR, scram_ref
from toolgate.settings import Settings
from toolgate.store.audit import checkpoint_bytes
from toolgate.topics.headers import CALL_ID, pairs
from toolgate.trust.checkpoint_keys import TrustedKeys
from toolgate.trust.deployment_keys import DeploymentKeys
from toolgate.trust.ed25519 import PublicKey
from toolgate.trust.integrity import KEY_HEADER, EdgeVerifier, raw_header
from toolgate.trust.keyset import parse
from toolgate.trust.signing import Keyring

from ..conftest import Pipeline, session_secure, started

pytestmark = pytest.mark.timeout(420)

REFRESH_S = 1  # how often the stages read their keyset here (5 s by default)
GRACE_S = 6
EVERY_S = 0.1
DRAFT = {
    "customer_id": "cust_acme01",
    "currency": "USD",
    "due_date": "2030-12-31",
    "lines": [{"description": "rotation", "quantity": 1, "unit_amount_cents": 900}],
}
EMAIL = {"to": "ap@coyote.example", "subject": "Rotation", "body": "Sent while the keys change."}


class Deployment:
    def __init__(self, pipeline: Pipeline) -> None:
        self.pipeline = pipeline
        self.home, self.env, self.runtime = pipeline.home, pipeline.env, pipeline.runtime
        self.printed: list[str] = []  # everything the commands said, to look for secrets in
        self.secrets: set[str] = set()  # every secret the keyset held

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        self.remember_secrets()
        done = subprocess.run(
            [sys.executable, "-m", "toolgate.cli", *args], env=self.env, capture_output=True, text=True, timeout=180
        )
        self.printed += [done.stdout, done.stderr]
        self.remember_secrets()
        return done

    def remember_secrets(self) -> None:
        keyset = parse((self.home / "secrets" / "deployment-secret").read_text())
        self.secrets |= {entry.secret for entry in keyset.entries if entry.secret}

    def sql(self, query: str, params: Any = None) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.runtime["database_url"], autocommit=True) as conn:
            return conn.execute(query, params).fetchall()

    def kafka(self, role: str) -> dict[str, str]:
        """A librdkafka client's settings as `role` (on a secured cluster, its principal's)."""
        return self.pipeline.kafka(role)

    def settings(self, secrets_dir: Path) -> Settings:
        """A client's settings on this host: the runtime file, no deployment secret."""
        return Settings(
            kafka_bootstrap=self.runtime["kafka_bootstrap"],
            database_url=self.runtime["database_url"],
            home=self.home,
            deployment_public_key=self.runtime["deployment_public_key"],
            secrets_dir=secrets_dir,
        )


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    home = tmp_path_factory.mktemp("rotation-home")
    with started(home, partitions=2, TOOLGATE_KEYSET_REFRESH_SECONDS=str(REFRESH_S)) as running:
        yield Deployment(running)


class Load:
    """Calls proposed at a steady rate from a thread, each waited for as it goes (as an agent
    does), and remembered with the phase it was sent in."""

    def __init__(self, client: ToolgateClient) -> None:
        self.client = client
        self.phase = "before"
        self.sent: list[tuple[str, str, Proposed]] = []  # (phase, tool, call)
        self.answers: dict[str, Future[Observed]] = {}
        self.errors: list[BaseException] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._waiting = ThreadPoolExecutor(max_workers=16, thread_name_prefix="wait")
        self._thread = threading.Thread(target=self._run, name="load", daemon=True)

    def propose(self, tool: str, arguments: dict[str, Any], **fields: Any) -> None:
        with self._lock:
            sent = self.client.propose(tool, arguments, agent_id="cli", user_id="rotation", watch=True, **fields)
            self.sent.append((self.phase, tool, sent))
        # Waited for without re-publishing: a record lost or refused would leave its call unanswered.
        self.answers[sent.call_id] = self._waiting.submit(self.client.wait, sent, 90.0, True, False)

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            try:
                if n % 2:
                    self.propose("invoice.create_draft", DRAFT, idempotency_key=f"rot-{uuid.uuid4().hex}")
                else:
                    self.propose("invoice.fetch", {"invoice_id": "inv_acme0001"})
            except BaseException as exc:
                self.errors.append(exc)
            n += 1
            self._stop.wait(EVERY_S)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def finals(self) -> dict[str, dict[str, Any]]:
        """Each call's final observation, for the calls that got one."""
        found = {}
        for call_id, answer in self.answers.items():
            try:
                found[call_id] = answer.result(timeout=120).as_json()
            except TimeoutError:
                continue
        self._waiting.shutdown(wait=False, cancel_futures=True)
        return found


class Approver:
    """An approval service started before the rotation: approves each packet it sees, as carol."""

    def __init__(self, deployment: Deployment, settings: Settings) -> None:
        self.client = ApprovalClient.from_settings(settings, client_id="rotation-approver", role=APPROVALS)
        self.key = Keyring(deployment.home / "approvers").load("carol")
        self.stop = threading.Event()
        self.approved: list[str] = []
        self._thread = threading.Thread(target=self._run, name="approver", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        for packet, traceparent in self.client.requests(["acme"], follow=True, stop=self.stop):
            self.client.decide(packet, approver_id="carol", key=self.key, approve=True, traceparent=traceparent)
            self.approved.append(packet.call_id)

    def close(self) -> None:
        self.stop.set()
        self._thread.join(30)
        self.client.close()


def read_topic(kafka: dict[str, str], topic: str) -> list[Any]:
    """Every record of `topic`, read with `kafka`'s client settings (Pipeline.kafka)."""
    consumer = Consumer({**kafka, "group.id": f"rot-{uuid.uuid4().hex[:8]}"})
    try:
        partitions = sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        records, last = [], time.monotonic()
        while time.monotonic() - last < 3.0:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                records.append(msg)
                last = time.monotonic()
        return records
    finally:
        consumer.close()


def step(deployment: Deployment, *args: str, timeout: float = 60.0) -> str:
    """`toolgate secret rotate`, again until the step is safe (it refuses until then)."""
    return timed_step(deployment, *args, timeout=timeout)[0]


def timed_step(deployment: Deployment, *args: str, timeout: float = 60.0) -> tuple[str, float]:
    """`step`, and when the call that took the step began (the step was taken after it)."""
    deadline = time.monotonic() + timeout
    while True:
        began = time.monotonic()
        done = deployment.cli("secret", "rotate", *args)
        if done.returncode == 0:
            return done.stdout, began
        assert "not yet safe" in done.stdout, done.stdout + done.stderr
        assert time.monotonic() < deadline, done.stdout
        time.sleep(0.5)


def current_key(deployment: Deployment) -> DeploymentKeys:
    keyset = parse((deployment.home / "secrets" / "deployment-secret").read_text())
    return DeploymentKeys(keyset.current.secret.encode())


def test_a_rotation_under_load_loses_no_call_and_refuses_no_genuine_record(
    deployment: Deployment, tmp_path: Path
) -> None:
    settings = deployment.settings(tmp_path)  # a client here holds no secret: it reads runtime.json
    for user in ("toolgate-mcp", "toolgate-approvals") if session_secure() else ():  # but its Kafka password
        shutil.copy2(deployment.home / "secrets" / scram_ref(user), tmp_path / scram_ref(user))
    first = current_key(deployment)
    client = ToolgateClient.from_settings(settings, client_id="rotation", role=DOOR)
    assert client.verifier is not None and client.verifier.key_ids == [first.key_id]
    approver = Approver(deployment, settings)
    load = Load(client)
    try:
        phases = rotate_under(load, deployment)
        finals = load.finals()
    finally:
        load.stop()
        approver.close()
        client.close()
    second, third = phases[2][2], phases[-1][2]
    assert not load.errors, load.errors
    # As the admin on a secured cluster: the dead letters are the operator's, acme's answers its agent's.
    observations = read_topic(deployment.kafka(ADMIN), "tool.observations.acme")
    letters = read_topic(deployment.kafka(ADMIN), "tool.deadletter")
    forged = deployment.sql("SELECT count(*) FROM toolgate.audit_log WHERE action = 'forged_record'")[0][0]
    report(load, finals, [phase for phase, *_ in phases], letters, observations)

    # Every call answered, once; nothing refused.
    final_counts = Counter(header(msg, CALL_ID) for msg in observations if is_final(msg))
    assert len(finals) == len(load.sent), "a call went unanswered"
    assert all(final_counts[sent.call_id] == 1 for *_, sent in load.sent), "a call answered other than once"
    assert letters == [] and forged == 0, "a genuine record was refused"
    assert {str(doc["status"]["taxonomy_class"]) for doc in finals.values()} == {"SUCCESS"}
    assert len(approver.approved) == len(phases)  # each phase's packet, under whichever key signed it

    # Observations named each of the three keys, and each verifies under the key it names.
    keys = (first, second, third)
    named = Counter(header(msg, KEY_HEADER) for msg in observations)
    assert set(named) == {k.key_id for k in keys}, named
    verifier = EdgeVerifier([k.public_key for k in keys])
    assert all(verifier.ok(m.topic(), m.key(), pairs(m.headers()), m.value()) for m in observations)

    # The audit chain verifies across both rotations; each checkpoint names the key that signed it.
    audited = deployment.cli("audit", "verify", "--json")
    assert audited.returncode == 0, audited.stdout + audited.stderr
    assert json.loads(audited.stdout)["anchor"]["key_id"] == third.key_id
    trusted = TrustedKeys(PublicKey(k.public_key) for k in keys)
    heads = deployment.sql("SELECT row_count, head_hash, signature, key_id FROM toolgate.audit_heads")
    assert {key_id for *_, key_id in heads} == {k.key_id for k in keys}
    assert all(trusted.ok(k, bytes(sig), checkpoint_bytes(n, head)) for n, head, sig, k in heads)

    no_secret_anywhere(deployment)


def rotate_under(load: Load, deployment: Deployment) -> list[tuple[str, float, DeploymentKeys]]:
    """Two rotations while `load` runs: step by step, then `--all`. The phases, each with when it
    began and the key that sealed then."""
    phases: list[tuple[str, float, DeploymentKeys]] = []

    def enter(phase: str) -> None:
        load.phase = phase
        phases.append((phase, time.monotonic(), current_key(deployment)))
        load.propose("notify.send_email", EMAIL, idempotency_key=f"rot-mail-{uuid.uuid4().hex}")

    load.start()
    enter("before")
    time.sleep(3)
    assert "staged" in step(deployment)
    enter("staged")
    time.sleep(2)
    promoted, began = timed_step(deployment, "--grace", str(GRACE_S))  # refused until every stage accepts it
    assert "promoted" in promoted
    enter("promoted")
    retired = deployment.cli("secret", "rotate").stdout
    if "retired" in retired:  # a loaded machine took the grace to ask: never sooner
        assert time.monotonic() - began >= GRACE_S, retired
    else:
        assert "not yet safe to retire" in retired, retired  # the grace lasts
        time.sleep(GRACE_S + 1)
        retired = step(deployment)
    assert "retired" in retired
    enter("retired")
    time.sleep(3)
    enter("rotate --all")
    everything = deployment.cli("secret", "rotate", "--all", "--grace", str(GRACE_S))
    assert everything.returncode == 0, everything.stdout + everything.stderr
    enter("after")
    time.sleep(3)
    load.stop()
    return phases


def header(msg: Any, name: str) -> str:
    return (raw_header(pairs(msg.headers()), name) or b"").decode()


def is_final(msg: Any) -> bool:
    from toolgate.schemas.codec import codec
    from toolgate.schemas.models import Observation

    return codec().decode(msg.value(), Observation).status.code != 202


def report(
    load: Load, finals: dict[str, dict[str, Any]], phases: list[str], letters: list[Any], observations: list[Any]
) -> None:
    """What the run shows, per phase (pytest -s prints it), and each call left unanswered."""
    by_call: dict[str, list[Any]] = {}
    for msg in observations:
        by_call.setdefault(header(msg, CALL_ID), []).append(msg)
    sent = Counter(phase for phase, _, _ in load.sent)
    answered = Counter(phase for phase, _, s in load.sent if s.call_id in finals)
    keys: dict[str, Counter[str]] = {}
    for phase, _, s in load.sent:
        for msg in by_call.get(s.call_id, []):
            keys.setdefault(phase, Counter())[header(msg, KEY_HEADER)] += 1
    for phase in phases:
        signed = dict(keys.get(phase, {}))
        print(f"rotation {phase:14} sent {sent[phase]:4}  answered {answered[phase]:4}  signed by {signed}")
    print(f"rotation total          sent {len(load.sent):4}  answered {len(finals):4}  dead letters {len(letters)}")
    for phase, tool, s in load.sent:
        if s.call_id not in finals:
            seen = [(m.offset(), header(m, KEY_HEADER), is_final(m)) for m in by_call.get(s.call_id, [])]
            print(f"unanswered {phase} {tool} {s.call_id}: {seen}")


def no_secret_anywhere(deployment: Deployment) -> None:
    assert len(deployment.secrets) == 3
    texts = [*deployment.printed, (deployment.home / "runtime.json").read_text()]
    for folder in ("logs", "telemetry"):
        texts += [p.read_text(errors="replace") for p in (deployment.home / folder).rglob("*") if p.is_file()]
    assert not [s for s in deployment.secrets for text in texts if s in text], "a deployment secret leaked"
    keyset = deployment.home / "secrets" / "deployment-secret"
    assert keyset.stat().st_mode & 0o777 == 0o600 and keyset.parent.stat().st_mode & 0o777 == 0o700
