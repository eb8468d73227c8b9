"""The embedded broker and Postgres as `toolgate up` and the tests start them (ops/stack/embedded.py)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import psycopg
import pytest

from toolgate.ops.stack.embedded import BROKER_THREADS, Broker
from toolgate.ops.stack.postgres import SOCKET_PATH_MAX, Postgres

from .conftest import Server


def test_the_broker_runs_on_one_cpu_with_two_runtime_threads(broker: Broker) -> None:
    if not isinstance(broker, Broker):
        pytest.skip("pinning is Tansu's: the session's broker is Apache Kafka (TOOLGATE_TEST_BROKER)")
    status = Path(f"/proc/{broker.process.pid}/status").read_text()
    allowed = next(
        line.split(":", 1)[1].strip() for line in status.splitlines() if line.startswith("Cpus_allowed_list")
    )
    environ = Path(f"/proc/{broker.process.pid}/environ").read_bytes().split(b"\0")
    assert allowed == str(min(os.sched_getaffinity(0)))
    assert f"TOKIO_WORKER_THREADS={BROKER_THREADS}".encode() in environ


def test_postgres_is_reached_through_its_unix_socket(postgres: Server) -> None:
    with psycopg.connect(postgres.url()) as conn:
        row = conn.execute("SELECT inet_server_addr(), current_user").fetchone()
        host = conn.info.host
    assert row == (None, "postgres")  # no server address: not TCP
    assert host == str(postgres.postgres.datadir)


def test_postgres_is_reached_through_tcp_where_its_socket_path_would_be_too_long(postgres: Server) -> None:
    running = postgres.postgres
    deep = Path("/" + "d" * (SOCKET_PATH_MAX - 12)) / "pgdata"
    placed = Postgres(
        deep, running.port, subprocess.Popen(["true"]), running.run_as, running.log_path, running.passfile
    )
    placed.process.wait()
    assert "@127.0.0.1:" in placed.url
    with psycopg.connect(placed.url) as conn:  # the same server, over TCP
        assert conn.execute("SELECT inet_server_addr() IS NOT NULL").fetchone() == (True,)
