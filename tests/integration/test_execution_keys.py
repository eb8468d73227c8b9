"""A round whose effects all run in Postgres writes each new idempotency key once, with its end,
and a key another transaction takes meanwhile is found when the round runs again. Against the
session's real Postgres, through `ExecutionHandler.handle`. And a round's key lookups stay index
probes however much the table has grown since the worker connected."""

from __future__ import annotations

import asyncio
import uuid

import psycopg

from toolgate.hashing import request_hash
from toolgate.workers.execution import keys
from toolgate.workers.execution.handler import ExecutionHandler
from toolgate.workers.runtime.emit import Emit

from .conftest import Database, Server
from .test_idempotency_race import draft_call, handle_round, with_handler

COUNT_UPDATES = """
CREATE TABLE key_updates (idempotency_key text NOT NULL);
CREATE FUNCTION key_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO key_updates VALUES (NEW.idempotency_key);
    RETURN NULL;
END $$;
CREATE TRIGGER key_updated AFTER UPDATE ON toolgate.idempotency_keys FOR EACH ROW EXECUTE FUNCTION key_updated();
"""


def test_a_new_key_is_inserted_once_with_its_end_and_replayed_after(database: Database) -> None:
    database.sql(COUNT_UPDATES)
    keys = [f"once-{uuid.uuid4().hex}" for _ in range(3)]
    out = handle_round(database, [draft_call(key, "acme") for key in keys])
    assert set(out.outcomes.values()) == {"SUCCESS"}
    rows = database.sql(
        "SELECT status, attempt, lease_owner, lease_until, completed_at IS NOT NULL, expires_at > now(),"
        " response->'outcome'->>'taxonomy_class', length(request) > 0"
        " FROM toolgate.idempotency_keys WHERE idempotency_key = ANY(%s)",
        (keys,),
    )
    assert rows == [("COMPLETED", 1, None, None, True, True, "SUCCESS", True)] * 3
    assert database.sql("SELECT count(*) FROM key_updates") == [(0,)]

    again = [draft_call(key, "acme") for key in keys]  # new calls, the same operations
    replayed = handle_round(database, again)
    assert [replayed.outcomes[c.call_id] for c in again] == ["SUCCESS"] * 3
    invoices = database.sql("SELECT count(*) FROM demo.invoices WHERE idempotency_key = ANY(%s)", (keys,))
    assert invoices == [(3,)]


def test_a_key_taken_meanwhile_is_found_when_the_round_runs_again(database: Database) -> None:
    """Another worker reserves the key after this round read that it was new: the round's
    insert waits for it, finds it taken, and the round runs again without its effect."""
    key = f"taken-{uuid.uuid4().hex}"
    call = draft_call(key, "acme")
    out = Emit("execution")

    async def work(handler: ExecutionHandler) -> None:
        async with await psycopg.AsyncConnection.connect(database.database_url) as other:
            await other.execute(
                "INSERT INTO toolgate.idempotency_keys (tenant_id, idempotency_key, request_hash, status, tool_name,"
                " tool_version, executor, call_id, home_partition, request, lease_owner, lease_until, expires_at)"
                " VALUES ('acme', %s, %s, 'PENDING', 'invoice.create_draft', '1.0.0', 'postgres', 'call_other', 0,"
                " '\\x00', 'another-worker', now() + interval '1 hour', now() + interval '1 day')",
                (key, request_hash(call.model)),
            )
            round_ = asyncio.create_task(handler.handle([call], out))
            await asyncio.sleep(1.0)
            assert not round_.done()  # its insert waits on the other worker's
            await other.commit()
            await round_

    asyncio.run(with_handler(database, work))
    assert out.outcomes[call.call_id] == "IDEMPOTENCY_CONFLICT"
    assert database.sql("SELECT count(*) FROM demo.invoices WHERE idempotency_key = %s", (key,)) == [(0,)]
    row = database.sql("SELECT status, lease_owner FROM toolgate.idempotency_keys WHERE idempotency_key = %s", (key,))
    assert row == [("PENDING", "another-worker")]


BULK_KEYS = """
INSERT INTO toolgate.idempotency_keys (tenant_id, idempotency_key, request_hash, status, tool_name, tool_version,
    executor, call_id, home_partition, request, expires_at)
SELECT 'acme', 'bulk-' || g, 'h', 'COMPLETED', 'invoice.create_draft', '1.0.0', 'postgres', 'call-bulk-' || g, 0,
    '\\x00', now() + interval '1 day'
FROM generate_series(1, %s) AS g
"""
SEQ_READ = "SELECT seq_tup_read FROM pg_stat_xact_user_tables WHERE relid = 'toolgate.idempotency_keys'::regclass"


def test_key_lookups_probe_the_index_after_the_table_has_grown(postgres: Server) -> None:
    """A worker's connection meets the table nearly empty (a new deployment, every benchmark
    run): a plan Postgres kept for the lookups then would scan the whole table on every round
    from then on, the cost of each round growing with every key ever written (until autovacuum
    analyzed the table, which a fresh server does not do in its first minute)."""
    with postgres.scratch("keys_plan") as db:

        async def lookups() -> int:
            async with await psycopg.AsyncConnection.connect(db.database_url) as conn:
                missing = [("acme", f"missing-{i}") for i in range(3)]
                for _ in range(12):  # past psycopg's prepare threshold, then Postgres's custom plans
                    async with conn.transaction():
                        assert await keys.lock(conn, missing) == {}
                        assert await keys.outcomes(conn, missing) == {}
                db.sql(BULK_KEYS, (3000,))
                async with conn.transaction():
                    await keys.lock(conn, missing)
                    await keys.outcomes(conn, missing)
                    row = await (await conn.execute(SEQ_READ)).fetchone()
                    return row[0] if row else 0

        assert asyncio.run(lookups()) == 0
