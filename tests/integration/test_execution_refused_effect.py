"""A round's Postgres effects run without savepoints; one the database refuses rolls the round
back whole, and it runs again with a savepoint for each call, so the refusal spoils none of the
others. Against the session's real Postgres, through `ExecutionHandler.handle`."""

from __future__ import annotations

import asyncio
import uuid

import psycopg
import pytest

from tests.unit.factories import draft_key
from toolgate.workers.execution.effects import Done
from toolgate.workers.execution.executors import Refused, run_postgres_batch

from .conftest import Database
from .test_idempotency_race import draft_call, handle_round
from .test_postgres_effects import job


def test_a_refused_effect_fails_alone_and_the_others_of_its_round_commit(database: Database) -> None:
    keys = [f"refused-{uuid.uuid4().hex}" for _ in range(3)]
    # The second names no customer there is: the database refuses its insert.
    calls = [draft_call(key, "acme", "cust_nobody" if n == 1 else "cust_acme01") for n, key in enumerate(keys)]
    out = handle_round(database, calls)
    assert [out.outcomes[c.call_id] for c in calls] == ["SUCCESS", "STALE_STATE", "SUCCESS"]
    statuses = dict(
        database.sql(
            "SELECT idempotency_key, status FROM toolgate.idempotency_keys WHERE idempotency_key = ANY(%s)", (keys,)
        )
    )
    assert [statuses[k] for k in keys] == ["COMPLETED", "FAILED_FINAL", "COMPLETED"]
    stored = {draft_key(k, version="1.0.0"): k for k in keys}
    invoices = database.sql("SELECT operation_key FROM demo.invoices WHERE operation_key = ANY(%s)", (list(stored),))
    assert sorted(stored[k] for (k,) in invoices) == sorted([keys[0], keys[2]])


def test_without_savepoints_a_refused_statement_spoils_the_transaction(database: Database) -> None:
    jobs = [
        job("invoice.create_draft", f"o1-{uuid.uuid4().hex}"),
        job("invoice.create_draft", f"o2-{uuid.uuid4().hex}", customer_id="cust_nobody"),
    ]

    async def batch() -> None:
        async with await psycopg.AsyncConnection.connect(database.database_url) as conn:
            with pytest.raises(Refused):
                async with conn.transaction():
                    await run_postgres_batch(conn, jobs, careful=False)
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
            async with conn.transaction():
                effects = await run_postgres_batch(conn, jobs[:1], careful=False)
            assert isinstance(effects[0], Done)

    asyncio.run(batch())
