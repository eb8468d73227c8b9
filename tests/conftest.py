"""The test session's real infrastructure.

`pipeline` runs the real `toolgate up` (embedded Tansu broker, embedded Postgres, every
worker as its own process, the demo provider) in a temporary TOOLGATE_HOME, with short
leases and sweep intervals so crash recovery is quick. `TOOLGATE_TEST_BROKER=kafka` runs the
session on Apache Kafka instead (`toolgate up --broker kafka`), with `TOOLGATE_TEST_BROKERS`
nodes (1 unless given; 3 for replication): `session_broker()` says which; with
`TOOLGATE_TEST_KAFKA_SECURE=1` too, that cluster runs secured (`toolgate up --secure`: SASL_SSL,
SCRAM-SHA-512, the standard authorizer, `setup --acls` applied; `session_secure()`). Then every
test's Kafka client connects as a principal of the home's (`Pipeline.kafka(role)`): the
pipeline's `client` as the MCP door's (it proposes for both demo agents and reads both tenants'
observations, as the door does), its `insider` as the admin's, for the tests that forge records
on internal topics as an attacker inside the cluster would (on a secured cluster nobody else may
write them). Tests talk to it
the way users do: the `toolgate` CLI and the client library over the real broker, SQL against
the real Postgres. Nothing is mocked.

A test that needs Postgres (or the broker) but no running worker does not wait for all this:
tests/integration/conftest.py starts just those, with a database and topics per module.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
from jsonschema import Draft202012Validator

from toolgate.client import Observed, Proposed, ToolgateClient
from toolgate.kafka_security import ADMIN, DOOR, client_config
from toolgate.settings import Settings
from toolgate.trust.agent_keys import AgentKeyring

REPO = Path(__file__).resolve().parent.parent
REFERENCE = REPO / "schemas" / "reference" / "observation.schema.json"
OBSERVATION_SCHEMA = Draft202012Validator(json.loads(REFERENCE.read_text()))

TEST_ENV = {
    "TOOLGATE_LEASE_SECONDS": "3",
    "TOOLGATE_RECONCILE_INTERVAL_SECONDS": "1",
    "TOOLGATE_APPROVAL_SWEEP_SECONDS": "0.5",
    "TOOLGATE_RETENTION_INTERVAL_SECONDS": "2",
    "TOOLGATE_VERIFICATION_WINDOW_SECONDS": "8",
    # Refusals of unproven records are counted in windows this long (60 s by default): the test
    # that floods them waits for a window to close (tests/e2e/test_unproven_audit.py).
    "TOOLGATE_REFUSAL_AUDIT_SECONDS": "15",
    "TOOLGATE_LOG_LEVEL": "INFO",
}
# The agents `toolgate up` registers for the demo tenants (keys in $TOOLGATE_HOME/agents).
AGENTS = {"acme": "cli", "globex": "globex-cli"}
# Settings of the broker's that pass from the test session's environment to its `toolgate up`
# (every other TOOLGATE_* variable of the session's is left out).
BROKER_ENV = ("TOOLGATE_KAFKA_CACHE", "TOOLGATE_KAFKA_HEAP_MB")


def session_broker() -> tuple[str, int]:
    """The broker the session's `toolgate up` (and the integration tier's broker) run on:
    ("tansu", 1) unless TOOLGATE_TEST_BROKER says "kafka" (TOOLGATE_TEST_BROKERS nodes)."""
    broker = os.environ.get("TOOLGATE_TEST_BROKER", "") or "tansu"
    nodes = int(os.environ.get("TOOLGATE_TEST_BROKERS", "") or "1")
    if broker not in ("tansu", "kafka") or nodes < 1 or (broker == "tansu" and nodes != 1):
        raise pytest.UsageError(f"TOOLGATE_TEST_BROKER={broker!r} TOOLGATE_TEST_BROKERS={nodes}: tansu, or kafka 1+")
    return broker, nodes


def session_secure() -> bool:
    """Whether the session's Kafka runs secured (TOOLGATE_TEST_KAFKA_SECURE=1; Kafka only)."""
    secure = (os.environ.get("TOOLGATE_TEST_KAFKA_SECURE", "") or "0").lower() in ("1", "true", "yes")
    if secure and session_broker()[0] != "kafka":
        raise pytest.UsageError("TOOLGATE_TEST_KAFKA_SECURE=1 needs TOOLGATE_TEST_BROKER=kafka")
    return secure


# Where a session keeps its temporary files, unless told (`--basetemp`): a directory of its own.
# pytest's default root, /tmp/pytest-of-<user>, is shared by every session of the user, and each
# session sets it back to 0700 when it starts; the embedded Postgres, which runs as another user
# when the tests run as root (ops/stack/embedded.py), reaches its data directory through it,
# and died mid-run ("Permission denied" on pg_control) when another pytest started meanwhile.
OWN_BASETEMP = pytest.StashKey[Path]()
PASSED = pytest.StashKey[bool]()


@pytest.hookimpl(tryfirst=True)  # before pytest's own tmp_path plugin reads the option
def pytest_configure(config: pytest.Config) -> None:
    if config.option.basetemp is None:
        own = Path(tempfile.mkdtemp(prefix="toolgate-pytest-"))
        config.option.basetemp = own
        config.stash[OWN_BASETEMP] = own


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    session.config.stash[PASSED] = exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED)


def pytest_unconfigure(config: pytest.Config) -> None:
    """A session that passed leaves nothing behind; one that did not keeps its files (logs,
    data directories) and says where they are."""
    own = config.stash.get(OWN_BASETEMP, None)
    if own is None or not own.exists():
        return
    if config.stash.get(PASSED, False):
        shutil.rmtree(own, ignore_errors=True)
    else:
        sys.stderr.write(f"\nthe session's temporary files: {own}\n")


@pytest.fixture(scope="session", autouse=True)
def broker_on_record(record_testsuite_property: Any) -> None:
    """The session's JUnit report says which broker it ran on: CI's Kafka tier checks it
    (.ci/ran_on_kafka.py), so a tier that fell back to the embedded broker cannot pass."""
    broker, nodes = session_broker()
    record_testsuite_property("broker", broker)
    record_testsuite_property("brokers", nodes)
    record_testsuite_property("secure", session_secure())


def assert_reference_observation(seen: Observed) -> dict[str, Any]:
    """Every observation a test sees must validate against the reference schema."""
    document = seen.as_json()
    errors = sorted(OBSERVATION_SCHEMA.iter_errors(document), key=str)
    assert not errors, f"observation of {seen.call_id} violates the reference schema: {errors[0]}"
    return document


@dataclass
class Pipeline:
    home: Path
    env: dict[str, str]
    process: subprocess.Popen[bytes]
    runtime: dict[str, Any]
    client: ToolgateClient
    insider: ToolgateClient  # may write any topic (the admin, on a secured cluster)
    seen: list[dict[str, Any]] = field(default_factory=list)

    def kafka(self, role: str | None = None) -> dict[str, str]:
        """A librdkafka client's settings on this home: its broker, and on a secured cluster the
        SASL/TLS settings of `role`'s principal (toolgate.kafka_security: ADMIN, OPERATOR, DOOR,
        APPROVALS, agent_role(...)); without a role, or unsecured, none."""
        security = kafka_config(self.home, role) if role is not None else {}
        return {**security, "bootstrap.servers": self.runtime["kafka_bootstrap"]}

    @property
    def settings(self) -> Settings:
        return Settings(
            kafka_bootstrap=self.runtime["kafka_bootstrap"],
            database_url=self.runtime["database_url"],
            home=self.home,
            endpoints=self.runtime["endpoints"],
            partitions=self.runtime["partitions"],
            deployment_public_key=self.runtime["deployment_public_key"],
        )

    @property
    def database_url(self) -> str:
        return str(self.runtime["database_url"])

    def refresh_runtime(self) -> dict[str, Any]:
        self.runtime = json.loads((self.home / "runtime.json").read_text())
        return self.runtime

    def sql(self, query: str, params: Any = None) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.database_url, autocommit=True) as conn:
            cur = conn.execute(query, params)
            return cur.fetchall() if cur.description else []

    def propose(self, tool: str, arguments: Any, **kwargs: Any) -> Proposed:
        """Propose as the demo agent of `tenant_id` (acme unless given), signed with its key."""
        defaults = {
            "agent_id": AGENTS[kwargs.get("tenant_id", "acme")],
            "user_id": "tester",
            "scopes": ["invoices:read", "invoices:write", "notify:send", "payments:charge"],
        }
        return self.client.propose(tool, arguments, watch=True, **{**defaults, **kwargs})

    def wait(self, sent: Proposed, timeout: float = 45.0, final: bool = True, resend: bool = True) -> dict[str, Any]:
        seen = self.client.wait(sent, timeout=timeout, final=final, resend=resend)
        document = assert_reference_observation(seen)
        self.seen.append(document)
        return document

    def first(self, sent: Proposed, predicate: Any, timeout: float = 45.0) -> dict[str, Any]:
        """The first observation of a call that satisfies `predicate`."""
        for seen in self.client.observations(
            tenant_id=sent.tenant_id,
            run_id=sent.run_id,
            call_ids=[sent.call_id],
            follow=True,
            start_offsets=sent.start_offsets,
            timeout=timeout,
        ):
            document = assert_reference_observation(seen)
            if predicate(document):
                return document
        raise TimeoutError(f"no matching observation for {sent.call_id} within {timeout}s")

    def call(self, tool: str, arguments: Any, **kwargs: Any) -> dict[str, Any]:
        return self.wait(self.propose(tool, arguments, **kwargs))

    def cli(self, *args: str, timeout: float = 90.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "toolgate.cli", *args], env=self.env, capture_output=True, text=True, timeout=timeout
        )

    def provider(self, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        token = (self.home / "secrets" / "demo-provider-token").read_text().strip()
        request = urllib.request.Request(
            self.runtime["endpoints"]["demo_provider"] + path,
            data=json.dumps(body).encode() if body is not None else None,
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())  # type: ignore[no-any-return]

    def open_invoice(self, amount_cents: int = 125000, tenant: str = "acme", currency: str = "USD") -> str:
        """A new open invoice: a charge marks its invoice paid, so each test charges its own."""
        invoice = f"inv_{uuid.uuid4().hex[:16]}"
        customer = {"acme": "cust_acme02", "globex": "cust_globex01"}[tenant]
        self.sql(
            "INSERT INTO demo.invoices (invoice_id, tenant_id, customer_id, status, currency, amount_cents) "
            "VALUES (%s, %s, %s, 'open', %s, %s)",
            (invoice, tenant, customer, currency, amount_cents),
        )
        return invoice

    def letters(self, keep: Any, everything: bool = False) -> list[dict[str, Any]]:
        """The dead letters `toolgate dlq list --json` shows that `keep` keeps, once it shows one: a
        stage publishes its letters after its round committed, so what the round wrote to Postgres
        may be seen before them."""

        def listed() -> list[dict[str, Any]]:
            done = self.cli("dlq", "list", "--json", *(["--all"] if everything else []))
            assert done.returncode == 0, done.stderr
            return [row for row in json.loads(done.stdout) if keep(row)]

        found: list[dict[str, Any]] = eventually(listed)
        return found

    def worker_pid(self, stage: str) -> int:
        return int(self.refresh_runtime()["workers"][stage])


def eventually(query: Any, timeout: float = 20.0) -> Any:
    """What `query()` returns once it returns something (polled); TimeoutError if it never does."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = query()
        if found:
            return found
        time.sleep(0.2)
    raise TimeoutError("nothing arrived")


def _wait_up(log: Path, process: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log.read_text() if log.exists() else ""
        if "toolgate is up" in text:
            return
        if process.poll() is not None:
            raise RuntimeError(f"toolgate up exited with {process.returncode}:\n{text}")
        time.sleep(0.3)
    raise TimeoutError(f"toolgate up not ready after {timeout}s:\n{log.read_text() if log.exists() else ''}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def session_env(home: Path, **overrides: str) -> dict[str, str]:
    """The environment of a `toolgate up` of this session's on `home`: the session's broker (and
    security), the test settings, then `overrides` (TOOLGATE_* names); every other TOOLGATE_*
    variable of the session's own environment is left out."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLGATE_") or k in BROKER_ENV}
    broker, nodes = session_broker()
    env.update(TEST_ENV, TOOLGATE_BROKER=broker, TOOLGATE_BROKERS=str(nodes))
    if session_secure():
        env["TOOLGATE_KAFKA_SECURE"] = "1"
    env.update(overrides, TOOLGATE_HOME=str(home))
    return env


def kafka_config(home: Path, role: str) -> dict[str, str]:
    """The SASL/TLS settings of `role`'s principal on `home`'s secured cluster (none on an
    unsecured one): what a test's own Kafka client connects with."""
    return client_config(Settings(home=home), role)


def _client(home: Path, env: dict[str, str], runtime: dict[str, Any], role: str) -> ToolgateClient:
    """A client of the home's pipeline, connected as `role`'s principal on a secured cluster."""
    return ToolgateClient(
        runtime["kafka_bootstrap"],
        client_id="pytest",
        keyring=AgentKeyring(home / "agents"),
        deployment_public_key=bytes.fromhex(runtime["deployment_public_key"]),
        proposal_max_age_s=float(env.get("TOOLGATE_PROPOSAL_MAX_AGE_SECONDS", "900")),
        kafka_config=kafka_config(home, role),
    )


@contextlib.contextmanager
def started(home: Path, *, partitions: int = 4, **overrides: str) -> Iterator[Pipeline]:
    """A real `toolgate up` in `home` with the test settings (and `overrides`, TOOLGATE_* names),
    until the block ends; every process it started is gone after."""
    env = session_env(home, **overrides)
    log = home / "up.out"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "toolgate.cli", "up", "--partitions", str(partitions)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        _wait_up(log, process, 180.0)
        runtime = json.loads((home / "runtime.json").read_text())
        client, insider = (_client(home, env, runtime, role) for role in (DOOR, ADMIN))
        yield Pipeline(home, env, process, runtime, client, insider)
        client.close()
        insider.close()
    finally:
        runtime_file = home / "runtime.json"
        final = json.loads(runtime_file.read_text()) if runtime_file.exists() else {}
        pids = [*final.get("workers", {}).values(), *final.get("infrastructure", {}).values()]
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(90)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
        time.sleep(0.5)
        orphans = [pid for pid in pids if _alive(pid)]
        assert not orphans, f"toolgate up left processes behind: {orphans}"


@pytest.fixture(scope="session")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pipeline]:
    with started(tmp_path_factory.mktemp("toolgate-home")) as running:
        yield running
