"""The embedded Postgres as `toolgate up` and the tests start it (ops/embedded.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import psycopg

from toolgate.ops.embedded import SOCKET_PATH_MAX, Postgres

from .conftest import Server


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
