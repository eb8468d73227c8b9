"""The migrations and the database's own guarantees, on the session's real Postgres: each test
on an empty database of its own (the migrations are what is tested)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from toolgate.ops.migrate import migrate, migration_files
from toolgate.store.usage import PER_DAY, RECORD, recent_calls
from toolgate.workers.policy.decision import Recent

from .conftest import Server


@pytest.fixture
def empty_database(postgres: Server) -> Iterator[str]:
    with postgres.scratch("empty", template=None) as database:
        yield database.database_url


def test_migrations_build_the_schema_once(empty_database: str) -> None:
    assert migrate(empty_database) == [name for name, _ in migration_files()]
    assert migrate(empty_database) == []  # applied once, then recorded
    with psycopg.connect(empty_database) as conn:
        tables = {
            r[0]
            for r in conn.execute(
                "SELECT table_schema || '.' || table_name FROM information_schema.tables "
                "WHERE table_schema IN ('toolgate', 'demo')"
            )
        }
        triggers = {r[0] for r in conn.execute("SELECT tgname FROM pg_trigger WHERE NOT tgisinternal")}
    assert {
        "toolgate.idempotency_keys",
        "toolgate.outbox",
        "toolgate.approvals",
        "toolgate.approval_decisions",
        "toolgate.approvers",
        "toolgate.usage_events",
        "toolgate.repair_attempts",
        "toolgate.usage_daily",
        "toolgate.audit_log",
        "toolgate.dead_letter_actions",
        "demo.customers",
        "demo.invoices",
    } <= tables
    assert "toolgate.usage" not in tables  # 0004 replaced the counters with usage events
    assert {"outbox_notify", "audit_log_append_only"} <= triggers


def test_audit_log_is_append_only(empty_database: str) -> None:
    migrate(empty_database)
    with psycopg.connect(empty_database, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO toolgate.audit_log (stage, action, actor, prev_hash, hash) VALUES ('t', 'a', 'x', '0', '1')"
        )
        for statement in ("UPDATE toolgate.audit_log SET actor = 'y'", "DELETE FROM toolgate.audit_log"):
            with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
                conn.execute(statement)


def test_outbox_inserts_wake_listeners(empty_database: str) -> None:
    migrate(empty_database)
    with (
        psycopg.connect(empty_database, autocommit=True) as listener,
        psycopg.connect(empty_database, autocommit=True) as writer,
    ):
        listener.execute("LISTEN toolgate_outbox")
        writer.execute(
            "INSERT INTO toolgate.outbox (topic, partition, kind, payload) VALUES ('results', 0, 'item', '\\x00')"
        )
        notices = list(listener.notifies(timeout=5.0, stop_after=1))
    assert [n.channel for n in notices] == ["toolgate_outbox"]


def test_idempotency_status_is_constrained(empty_database: str) -> None:
    migrate(empty_database)
    with psycopg.connect(empty_database, autocommit=True) as conn, pytest.raises(psycopg.errors.CheckViolation):
        conn.execute(
            "INSERT INTO toolgate.idempotency_keys (tenant_id, idempotency_key, request_hash, status, tool_name, "
            "tool_version, executor, call_id, home_partition, request, expires_at) "
            "VALUES ('t', 'k', 'h', 'DONE-ISH', 'x', '1', 'postgres', 'c', 0, '\\x00', now())"
        )


def test_recent_calls_counts_only_inside_each_window(empty_database: str) -> None:
    migrate(empty_database)
    with psycopg.connect(empty_database, autocommit=True) as conn:
        for i, (tenant, tool, ago_s) in enumerate(
            [("acme", "t.a", 1), ("acme", "t.a", 8), ("acme", "t.a", 30), ("acme", "t.b", 2), ("globex", "t.a", 3)]
        ):
            conn.execute(
                "INSERT INTO toolgate.usage_events (event_id, spends, tenant_id, run_id, tool_name, at) "
                "VALUES (%s, '{write}', %s, 'r', %s, now() - make_interval(secs => %s))",
                (f"e{i}", tenant, tool, ago_s),
            )
        now_ms = conn.execute("SELECT (extract(epoch FROM now()) * 1000)::bigint").fetchone()[0]

    async def read() -> dict[tuple[str, str], Recent]:
        async with await psycopg.AsyncConnection.connect(empty_database) as aconn:
            return await recent_calls(aconn, {("acme", "t.a"): 10, ("acme", "t.b"): 1, ("globex", "t.a"): 60})

    recent = asyncio.run(read())
    assert set(recent) == {("acme", "t.a"), ("globex", "t.a")}  # t.b's one call is older than its 1 s window
    assert recent[("acme", "t.a")].count == 2  # the call 30 s ago is outside the 10 s window
    assert abs(recent[("acme", "t.a")].oldest_ms - (now_ms - 8_000)) < 1_000
    assert recent[("globex", "t.a")].count == 1


def test_usage_is_recorded_once_per_operation_and_counted_per_utc_day(empty_database: str) -> None:
    migrate(empty_database)

    def event(event_id: str, spends: list[str], tenant: str = "acme") -> dict[str, Any]:
        return {
            "event_id": event_id,
            "spends": spends,
            "tenant_id": tenant,
            "agent_id": "cli",
            "run_id": "r",
            "tool_name": "t",
        }

    with psycopg.connect(empty_database, autocommit=True) as conn:
        conn.execute(RECORD, (json.dumps([event("op1", ["write"]), event("op2", ["write"])]),))
        conn.execute(RECORD, (json.dumps([event("op1", ["write"])]),))  # a retry: no new spend
        conn.execute(RECORD, (json.dumps([event("op3", ["financial", "write"], "globex")]),))
        conn.execute(  # yesterday's spend does not count today
            "INSERT INTO toolgate.usage_daily VALUES ('acme', 'write', (now() AT TIME ZONE 'UTC')::date - 1, 500)"
        )
        today = {(t, d): n for t, d, n in conn.execute(PER_DAY, (["acme", "globex"],))}
        events = conn.execute("SELECT count(*) FROM toolgate.usage_events").fetchone()[0]
    assert today == {("acme", "write"): 2, ("globex", "financial"): 1, ("globex", "write"): 1}
    assert events == 3


def test_the_embedded_server_checkpoints_by_the_load_it_was_measured_at(postgres: Server) -> None:
    """A call writes ~9 KB of WAL: with Postgres's default 1 GB of it between checkpoints, one came
    every ~60,000 calls at full speed, and the full-page images after it made every call dearer
    (ops/stack/embedded.py). The embedded server keeps 4 GB and checkpoints at most every 15 minutes."""
    with psycopg.connect(postgres.url()) as conn:
        shown = dict(
            conn.execute(
                "SELECT name, setting || coalesce(unit, '') FROM pg_settings "
                "WHERE name IN ('max_wal_size', 'checkpoint_timeout')"
            ).fetchall()
        )
    assert shown == {"max_wal_size": "4096MB", "checkpoint_timeout": "900s"}
