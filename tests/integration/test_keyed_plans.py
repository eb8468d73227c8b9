"""The statements that join a round's keys to a table that grows without bound find each key by
its index however much the table has grown since the worker connected (`db.keyed`). Against
the session's real Postgres: each statement runs a dozen times on a nearly empty table (past
psycopg's prepare threshold and Postgres's custom plans), the table grows, and the statement's
next run reads no row by sequential scan (`pg_stat_xact_user_tables`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest

from toolgate.store.calls import DIGESTS
from toolgate.store.db import keyed
from toolgate.store.keys import LOCK, OUTCOMES
from toolgate.store.keys import TO_COMPENSATE as COMPENSATION_LOAD
from toolgate.store.repairs import REPAIRS

from .conftest import Server

GROWN = 3000
SEQ_READ = "SELECT coalesce(sum(seq_tup_read), 0) FROM pg_stat_xact_user_tables WHERE relname = %s"


@dataclass(frozen=True)
class Case:
    query: str
    params: Any
    table: str
    grow: str  # inserts GROWN rows, none of them a key the statement asks for ('': GROW_KEYS)


# Grows idempotency_keys: keys none of the statements asks for (their call_ids are none that the
# compensation's load asks for either).
GROW_KEYS = """
INSERT INTO toolgate.idempotency_keys (tenant_id, idempotency_key, request_hash, status, tool_name, tool_version,
    executor, call_id, home_partition, request, expires_at)
SELECT 'acme', 'bulk-' || g, 'h', 'COMPLETED', 'invoice.create_draft', '1.0.0', 'postgres', 'call-bulk-' || g, 0,
    '\\x00', now() + interval '1 day'
FROM generate_series(1, %s) AS g
"""
MISSING = (["acme", "acme"], ["missing-1", "missing-2"])
CASES = {
    "execution lock": Case(LOCK, MISSING, "idempotency_keys", ""),
    "late call outcomes": Case(OUTCOMES, MISSING, "idempotency_keys", ""),
    "compensation load": Case(COMPENSATION_LOAD, MISSING, "idempotency_keys", ""),
    "validation digests": Case(
        DIGESTS,
        MISSING,
        "calls",
        """INSERT INTO toolgate.calls (tenant_id, call_id, proposal_digest, agent_id)
           SELECT 'acme', 'call-bulk-' || g, 'digest', 'cli' FROM generate_series(1, %s) AS g""",
    ),
    "repair history": Case(
        REPAIRS,
        (["acme", "acme"], ["cli", "cli"], ["missing-1", "missing-2"]),
        "repair_attempts",
        """INSERT INTO toolgate.repair_attempts (tenant_id, agent_id, run_id, logical_operation_id, call_id,
           payload_fingerprint, error_fingerprint)
           SELECT 'acme', 'cli', 'run-' || g, 'op-' || g, 'call-bulk-' || g, 'p', 'e'
           FROM generate_series(1, %s) AS g""",
    ),
}


async def scanned_after_growth(
    database_url: str, run: Callable[[psycopg.AsyncConnection[Any]], Awaitable[None]], grow: str, table: str
) -> int:
    """Rows of `table` read by sequential scan when `run` (one transaction's statements) runs once
    more after `grow` added GROWN rows, on a connection that ran it a dozen times before: past
    psycopg's prepare threshold and Postgres's custom plans, so a plan kept from the nearly empty
    table is the one that runs."""
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        for _ in range(12):
            async with conn.transaction():
                await run(conn)
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as other:
            await other.execute(grow, (GROWN,))
        async with conn.transaction():
            await run(conn)
            row = await (await conn.execute(SEQ_READ, (table,))).fetchone()
            return int(row[0]) if row else 0


@pytest.mark.parametrize("name", CASES)
def test_a_keyed_statement_probes_the_index_after_its_table_has_grown(postgres: Server, name: str) -> None:
    case = CASES[name]

    async def run(conn: psycopg.AsyncConnection[Any]) -> None:
        await keyed(conn, case.query, case.params)

    with postgres.scratch("keyed_plans") as db:
        assert asyncio.run(scanned_after_growth(db.database_url, run, case.grow or GROW_KEYS, case.table)) == 0
