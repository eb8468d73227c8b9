"""`toolgate up` pointed at existing Kafka and Postgres starts no broker or database of its own."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from toolgate.client import ToolgateClient
from toolgate.kafka_security import ADMIN, scram_ref
from toolgate.ops.kafka_credentials import ADMIN_USER, client_environment
from toolgate.ops.roles import with_database
from toolgate.ops.stack.kafka_tls import Certificates
from toolgate.trust.agent_keys import AgentKeyring

from ..conftest import Pipeline, _wait_up, assert_reference_observation, session_secure

pytestmark = pytest.mark.timeout(240)


def _children(pid: int) -> list[str]:
    out = subprocess.run(["ps", "-o", "args=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [line.strip() for line in out.splitlines() if line.strip()]


def _as_admin(pipeline: Pipeline, home: Path) -> dict[str, str]:
    """On a secured cluster, the external deployment is configured as its admin (one identity for
    every process, as a deployment given one set of credentials is): the environment names the
    user and its password's reference, the password a file of the new home's secrets."""
    if not session_secure():
        return {}
    secrets = home / "secrets"
    secrets.mkdir(mode=0o700)
    shutil.copy2(pipeline.home / "secrets" / scram_ref(ADMIN_USER), secrets / scram_ref(ADMIN_USER))
    return client_environment(ADMIN_USER, Certificates(pipeline.home / "kafka" / "tls"))


def test_up_uses_the_configured_broker_and_database(pipeline: Pipeline, tmp_path: Path) -> None:
    prefix = f"ext{uuid.uuid4().hex[:6]}."
    database = f"tg_{uuid.uuid4().hex[:10]}"
    pipeline.sql(f"CREATE DATABASE {database}")
    database_url = with_database(pipeline.database_url, database)
    env = {
        **pipeline.env,
        "TOOLGATE_HOME": str(tmp_path),
        "TOOLGATE_TOPIC_PREFIX": prefix,
        "TOOLGATE_KAFKA_BOOTSTRAP": pipeline.runtime["kafka_bootstrap"],
        "TOOLGATE_DATABASE_URL": database_url,
        **_as_admin(pipeline, tmp_path),
    }
    log = tmp_path / "up.out"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "toolgate.cli", "up", "--no-demo", "--partitions", "2"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        _wait_up(log, process, 180.0)
        runtime = json.loads((tmp_path / "runtime.json").read_text())
        assert runtime["kafka_bootstrap"] == pipeline.runtime["kafka_bootstrap"]
        assert runtime["database_url"] == database_url
        assert runtime["infrastructure"] == {}
        children = _children(process.pid)
        assert not [c for c in children if "tansu" in c or "postgres" in c], children
        assert len([c for c in children if " worker " in c]) == 7
        # A deployment without the demo registers its own tenants and agents.
        for command in (
            ["tenants", "add", "acme"],
            ["agents", "add", "ext", "--tenant", "acme", "--scopes", "invoices:read"],
        ):
            done = subprocess.run(
                [sys.executable, "-m", "toolgate.cli", *command], env=env, capture_output=True, text=True, timeout=60
            )
            assert done.returncode == 0, done.stderr
        client = ToolgateClient(
            runtime["kafka_bootstrap"],
            prefix=prefix,
            client_id="pytest-external",
            keyring=AgentKeyring(tmp_path / "agents"),
            deployment_public_key=bytes.fromhex(runtime["deployment_public_key"]),
            kafka_config=pipeline.kafka(ADMIN),
        )
        sent = client.propose("invoice.fetch", {"invoice_id": "inv_acme0001"}, agent_id="ext", user_id="u", watch=True)
        observation = assert_reference_observation(client.wait(sent, timeout=60))
        client.close()
        # Without --demo nothing seeded the new database: the invoice is not there.
        assert (observation["status"]["taxonomy_class"], observation["result_payload"]["errors"][0]["code"]) == (
            "STALE_STATE",
            "resource_missing",
        )
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(90)
        time.sleep(0.5)
        pipeline.sql(f"DROP DATABASE {database} WITH (FORCE)")
    assert not _children(process.pid)
    assert "stopped" in log.read_text()
