"""The embedded Postgres requires a password of every role (review N8), through the running
`toolgate up`: no role logs in without its password, on the socket or over TCP, not even the
superuser; the worker role still cannot touch the audit log; the passwords live only in their
files in the secrets directory (0600, the directory 0700), never in a URL, runtime.json, a
process's environment, a log or the audit log; and a home made before, whose Postgres trusted
every local connection, comes up requiring passwords from then on."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import errors

from toolgate.ops.migrate import migrate
from toolgate.ops.stack import postgres as embedded_postgres
from toolgate.ops.stack import processes

from ..conftest import Pipeline, _wait_up

pytestmark = pytest.mark.timeout(420)

ROLES = ("postgres", "toolgate_worker")


def endpoints(database_url: str) -> list[tuple[str, int]]:
    """Where the server listens: the socket directory the runtime URL names, and TCP."""
    info = psycopg.conninfo.conninfo_to_dict(database_url)
    return [(str(info["host"]), int(str(info["port"]))), ("127.0.0.1", int(str(info["port"])))]


def refused(host: str, port: int, user: str, password: str | None = None) -> str:
    """The server's (or libpq's) refusal of a login without `user`'s password; fails if it logs in."""
    params: dict[str, Any] = {"host": host, "port": port, "user": user, "dbname": "postgres", "connect_timeout": 5}
    params["passfile"] = "/nonexistent"  # no ~/.pgpass either
    if password is not None:
        params["password"] = password
    try:
        with psycopg.connect(**params):
            pass
    except psycopg.OperationalError as exc:
        return str(exc)
    raise AssertionError(f"{user} logged in at {host}:{port} without its password")


def without_passfile(url: str) -> str:
    return urlunsplit(urlsplit(url)._replace(query=""))


def assert_passwords_required(runtime: dict[str, Any]) -> None:
    env = {k: v for k, v in os.environ.items() if k.startswith("PG")}
    assert not env, f"libpq settings in the test's environment: {sorted(env)}"
    for host, port in endpoints(runtime["database_url"]):
        for role in ROLES:
            assert "password" in refused(host, port, role)
            assert "password authentication failed" in refused(host, port, role, "guess")
    for url in (runtime["database_url"], runtime["worker_database_url"]):  # the owner's and the workers'
        with pytest.raises(psycopg.OperationalError, match="password"):
            psycopg.connect(without_passfile(url), connect_timeout=5, passfile="/nonexistent").close()
    with psycopg.connect(runtime["database_url"]) as conn:
        assert conn.execute("SELECT current_user").fetchone() == ("postgres",)
    with psycopg.connect(runtime["worker_database_url"]) as conn:
        assert conn.execute("SELECT current_user").fetchone() == ("toolgate_worker",)


def test_no_role_logs_in_without_its_password(pipeline: Pipeline) -> None:
    assert_passwords_required(pipeline.refresh_runtime())


@pytest.mark.parametrize(
    "statement",
    [
        "DELETE FROM toolgate.audit_log",
        "UPDATE toolgate.audit_log SET action = 'nothing'",
        "TRUNCATE toolgate.audit_log",
        "ALTER TABLE toolgate.audit_log DISABLE TRIGGER USER",
        "DELETE FROM toolgate.audit_heads",
        "UPDATE toolgate.approvers SET tenants = '{acme,globex}'",
        "INSERT INTO toolgate.agents (agent_id, tenant_id) VALUES ('mallory', 'acme')",
        "ALTER ROLE toolgate_worker SUPERUSER",
    ],
)
def test_the_worker_role_still_cannot_touch_the_audit_log_or_the_registries(pipeline: Pipeline, statement: str) -> None:
    with psycopg.connect(pipeline.refresh_runtime()["worker_database_url"], autocommit=True) as conn:
        assert conn.execute("SELECT current_user").fetchone() == ("toolgate_worker",)
        with pytest.raises(errors.InsufficientPrivilege):
            conn.execute(statement)


def test_the_passwords_are_only_in_their_files(pipeline: Pipeline) -> None:
    runtime = pipeline.refresh_runtime()
    secrets = pipeline.home / "secrets"
    files = {role: secrets / f"pgpass-{role}" for role in ROLES}
    assert stat.S_IMODE(secrets.stat().st_mode) == 0o700
    assert {stat.S_IMODE(path.stat().st_mode) for path in files.values()} == {0o600}
    passwords = {role: path.read_text().strip().rsplit(":", 1)[1] for role, path in files.items()}
    assert urlsplit(runtime["database_url"]).password is None
    assert urlsplit(runtime["worker_database_url"]).password is None
    assert f"passfile={files['toolgate_worker']}".replace("/", "%2F") in runtime["worker_database_url"]
    assert "pgpass-postgres" not in runtime["worker_database_url"]  # workers get their own file only
    places = [pipeline.home / "runtime.json", pipeline.home / "up.out", *(pipeline.home / "logs").glob("*")]
    places += [p for p in (pipeline.home / "telemetry").rglob("*") if p.is_file()]
    environs = [Path(f"/proc/{pid}/environ") for pid in runtime["workers"].values()]
    for password in passwords.values():
        for place in places + [e for e in environs if e.exists()]:
            assert password.encode() not in place.read_bytes(), f"a password in {place}"
        assert pipeline.sql(
            "SELECT count(*) FROM toolgate.audit_log WHERE detail::text LIKE %s", (f"%{password}%",)
        ) == [(0,)]


def trust_home(home: Path) -> None:
    """A home as `toolgate up` made it before passwords (main at 607dff5): a data directory made
    with `initdb --auth=trust`, migrated, and the worker role allowed to log in without one."""
    datadir, run_as = home / "pgdata", embedded_postgres._system_user()
    datadir.mkdir(parents=True)
    if run_as:
        embedded_postgres._let_user_reach(datadir)
        os.chown(datadir, *_ids(run_as))
    initdb = [str(embedded_postgres._postgres_bin() / "initdb"), "-D", str(datadir), "-U", "postgres", "--auth=trust"]
    subprocess.run([*initdb, "--encoding=UTF8", "--no-instructions"], check=True, capture_output=True, user=run_as)
    port = processes.free_port()
    server = subprocess.Popen(
        [str(embedded_postgres._postgres_bin() / "postgres"), "-D", str(datadir), "-p", str(port), "-k", str(datadir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        user=run_as,
    )
    try:
        url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        deadline = time.monotonic() + 30
        while True:
            try:
                psycopg.connect(url, connect_timeout=2).close()
                break
            except psycopg.OperationalError:
                assert time.monotonic() < deadline and server.poll() is None
                time.sleep(0.2)
        migrate(url)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ALTER ROLE toolgate_worker LOGIN")
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(30)


def _ids(user: str) -> tuple[int, int]:
    import pwd

    entry = pwd.getpwnam(user)
    return entry.pw_uid, entry.pw_gid


def run_up(home: Path, env: dict[str, str], log: Path) -> tuple[subprocess.Popen[bytes], dict[str, Any]]:
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "toolgate.cli", "up", "--partitions", "2"], env=env, stdout=out, stderr=out
        )
    _wait_up(log, process, 180.0)
    return process, json.loads((home / "runtime.json").read_text())


def stop(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(90)
    except subprocess.TimeoutExpired:
        process.kill()
        raise


def test_up_on_a_home_that_trusted_every_connection_requires_passwords(pipeline: Pipeline, tmp_path: Path) -> None:
    home = tmp_path / "home"
    trust_home(home)
    # Postgres is what this test is about: its home runs on the embedded broker whatever the
    # session's (two starts of a three-node Kafka cluster would add two minutes and test no more).
    env = {k: v for k, v in pipeline.env.items() if k != "TOOLGATE_KAFKA_SECURE"}
    env.update(TOOLGATE_HOME=str(home), TOOLGATE_BROKER="tansu", TOOLGATE_BROKERS="1")
    for n, start in enumerate(("the trusting home, migrated", "the same home, started again")):
        process, runtime = run_up(home, env, tmp_path / f"up{n}.out")
        try:
            assert_passwords_required(runtime)
            fetch = ["propose", "invoice.fetch", "--args", '{"invoice_id": "inv_acme0001"}', "--wait", "--json"]
            fetched = subprocess.run(
                [sys.executable, "-m", "toolgate.cli", *fetch], env=env, capture_output=True, text=True, timeout=90
            )
            assert fetched.returncode == 0, (start, fetched.stdout, fetched.stderr)
            assert json.loads(fetched.stdout)["observation"]["status"]["taxonomy_class"] == "SUCCESS", start
        finally:
            stop(process)
    hba = [line.split() for line in (home / "pgdata" / "pg_hba.conf").read_text().splitlines()]
    assert not [line for line in (tmp_path / "up0.out").read_text().splitlines() if "Traceback" in line]
    assert {line[-1] for line in hba if line and not line[0].startswith("#")} == {"scram-sha-256"}
