"""The embedded broker and Postgres as `toolgate up` and the tests start them (ops/embedded.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import psycopg
import pytest

from toolgate.ops.embedded import SOCKET_PATH_MAX, Broker, Postgres, broker_environment

from .conftest import Server


def environment_of(pid: int) -> dict[str, str]:
    pairs = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(pair.decode().split("=", 1) for pair in pairs if b"=" in pair)


def test_the_broker_runs_its_async_runtime_on_one_thread(broker: Broker) -> None:
    assert environment_of(broker.process.pid)["TOKIO_WORKER_THREADS"] == "1"


def test_an_operator_may_give_the_broker_more_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKIO_WORKER_THREADS", "4")
    assert broker_environment()["TOKIO_WORKER_THREADS"] == "4"


def test_postgres_is_reached_through_its_unix_socket(postgres: Server) -> None:
    with psycopg.connect(postgres.url()) as conn:
        row = conn.execute("SELECT inet_server_addr(), current_user").fetchone()
        host = conn.info.host
    assert row == (None, "postgres")  # no server address: not TCP
    assert host == str(postgres.postgres.datadir)


def test_postgres_is_reached_through_tcp_where_its_socket_path_would_be_too_long(postgres: Server) -> None:
    running = postgres.postgres
    deep = Path("/" + "d" * (SOCKET_PATH_MAX - 12)) / "pgdata"
    placed = Postgres(deep, running.port, subprocess.Popen(["true"]), running.run_as, running.log_path)
    placed.process.wait()
    assert "@127.0.0.1:" in placed.url
    with psycopg.connect(placed.url) as conn:  # the same server, over TCP
        assert conn.execute("SELECT inet_server_addr() IS NOT NULL").fetchone() == (True,)
