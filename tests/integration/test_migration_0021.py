"""Migration 0021 on a deployment's history, on the session's real Postgres: what rows written
before it become. Runs (N12): a repair attempt takes the agent that registered its call_id, or
'' when that registration is gone; a usage event names no call, so it and its run's counters
belong to agent '', which no agent is. Invoices (N9): keyed by (tenant, id), the caller's-key
column renamed to operation_key with its values kept."""

from __future__ import annotations

import psycopg

from toolgate.ops.migrate import migrate
from toolgate.store.usage import PER_RUN

from .conftest import Server, migrated_before


def test_rows_from_before_0021_become_runs_of_their_agent_or_of_nobody(postgres: Server) -> None:
    with postgres.scratch("migration_0021", template=None) as scratch:
        with psycopg.connect(scratch.database_url, autocommit=True) as conn:
            migrated_before(conn, "0021")
            conn.execute("INSERT INTO toolgate.calls VALUES ('acme', 'call-a', 'digest', 'cli', now())")
            conn.execute(
                "INSERT INTO toolgate.repair_attempts (tenant_id, run_id, logical_operation_id, call_id, "
                "payload_fingerprint, error_fingerprint) VALUES "
                "('acme', 'r1', 'op', 'call-a', 'p1', 'e1'), ('acme', 'r1', 'op', 'call-gone', 'p2', 'e2')"
            )
            conn.execute(
                "INSERT INTO toolgate.usage_events (event_id, tenant_id, run_id, tool_name, spends) "
                "VALUES ('op1', 'acme', 'r1', 't.a', '{write}')"
            )
            conn.execute("INSERT INTO demo.customers VALUES ('cust_1', 'acme', 'A', 'a@a.example')")
            conn.execute(
                "INSERT INTO demo.invoices (invoice_id, tenant_id, customer_id, status, currency, amount_cents, "
                "idempotency_key) VALUES ('inv_1', 'acme', 'cust_1', 'draft', 'USD', 1, 'order-1')"
            )
        assert "0021_tenant_bound_keys.sql" in migrate(scratch.database_url)
        with psycopg.connect(scratch.database_url, autocommit=True) as conn:
            repairs = conn.execute("SELECT call_id, agent_id FROM toolgate.repair_attempts ORDER BY 1").fetchall()
            assert repairs == [("call-a", "cli"), ("call-gone", "")]
            assert conn.execute("SELECT agent_id FROM toolgate.usage_events").fetchall() == [("",)]
            runs = conn.execute("SELECT tenant_id, agent_id, run_id, dimension, used FROM toolgate.usage_runs")
            assert runs.fetchall() == [("acme", "", "r1", "write", 1)]
            # cli's run r1 starts afresh; the counters follow new events by their agent.
            assert conn.execute(PER_RUN.replace("%b", "%s"), (["acme"], ["cli"], ["r1"])).fetchall() == []
            conn.execute(
                "INSERT INTO toolgate.usage_events (event_id, tenant_id, agent_id, run_id, tool_name, spends) "
                "VALUES ('op2', 'acme', 'cli', 'r1', 't.a', '{write}')"
            )
            assert conn.execute(PER_RUN.replace("%b", "%s"), (["acme"], ["cli"], ["r1"])).fetchall() == [
                ("acme", "cli", "r1", "write", 1)
            ]
            # The invoice keeps its id and its key; another tenant may hold the same id.
            assert conn.execute("SELECT invoice_id, operation_key FROM demo.invoices").fetchall() == [
                ("inv_1", "order-1")
            ]
            conn.execute("INSERT INTO demo.customers VALUES ('cust_2', 'globex', 'G', 'g@g.example')")
            conn.execute(
                "INSERT INTO demo.invoices (invoice_id, tenant_id, customer_id, status, currency, amount_cents) "
                "VALUES ('inv_1', 'globex', 'cust_2', 'draft', 'USD', 2)"
            )
