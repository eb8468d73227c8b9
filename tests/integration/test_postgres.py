"""The migrations and the database's own guarantees, on the session's real Postgres."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest

from toolgate.ops.migrate import migrate, migration_files

from ..conftest import Pipeline


@pytest.fixture
def empty_database(pipeline: Pipeline) -> Iterator[str]:
    name = f"tg_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pipeline.database_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    url = pipeline.database_url.rsplit("/", 1)[0] + f"/{name}"
    yield url
    with psycopg.connect(pipeline.database_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


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
