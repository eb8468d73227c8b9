"""A round whose effects all run in Postgres writes each new idempotency key once, with its end,
and a key another transaction takes meanwhile is found when the round runs again. Against the
session's real Postgres, through `ExecutionHandler.handle`. And a round's key updates stay index
probes however much the table has grown since the worker connected."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import psycopg

from tests.unit.factories import draft_key
from toolgate.store import keys as idempotency_keys
from toolgate.workers.execution.handler import ExecutionHandler
from toolgate.workers.runtime.emit import Emit

from .conftest import Database, Server
from .test_idempotency_race import draft_call, handle_round, with_handler
from .test_keyed_plans import GROW_KEYS, scanned_after_growth

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
    stored = [draft_key(k, version="1.0.0") for k in keys]
    invoices = database.sql("SELECT count(*) FROM demo.invoices WHERE operation_key = ANY(%s)", (stored,))
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
                (key, call.model.call.request_hash),
            )
            round_ = asyncio.create_task(handler.handle([call], out))
            await asyncio.sleep(1.0)
            assert not round_.done()  # its insert waits on the other worker's
            await other.commit()
            await round_

    asyncio.run(with_handler(database, work))
    assert out.outcomes[call.call_id] == "IDEMPOTENCY_CONFLICT"
    stored = draft_key(key, version="1.0.0")
    assert database.sql("SELECT count(*) FROM demo.invoices WHERE operation_key = %s", (stored,)) == [(0,)]
    row = database.sql("SELECT status, lease_owner FROM toolgate.idempotency_keys WHERE idempotency_key = %s", (key,))
    assert row == [("PENDING", "another-worker")]


def test_key_updates_probe_the_index_after_the_table_has_grown(postgres: Server) -> None:
    """Settling and re-driving keys, as a round does after effects outside Postgres, on a table
    that grew after the worker connected: no sequential scan (the lookups' own test is
    test_keyed_plans.py)."""
    missing = [("acme", f"missing-{i}") for i in range(3)]
    ends = [ending(key, "COMPLETED", {"outcome": "SUCCESS"}) for _, key in missing]
    again = [redrive_row(key, b"\x01") for _, key in missing]

    async def round_(conn: psycopg.AsyncConnection[Any]) -> None:
        await idempotency_keys.settle(conn, ends, 30.0)
        await idempotency_keys.redrive(conn, again, "worker-1", 30.0)

    with postgres.scratch("keys_plan") as db:
        assert asyncio.run(scanned_after_growth(db.database_url, round_, GROW_KEYS, "idempotency_keys")) == 0


def test_a_key_is_settled_and_redriven_from_its_arrays(database: Database) -> None:
    """`settle` ends a PENDING key with its response; `redrive` leases a key again to a new
    attempt with the request's bytes as received."""
    key = f"ends-{uuid.uuid4().hex}"
    database.sql(PENDING_KEY, (key,))

    async def settle_then_redrive() -> None:
        async with await psycopg.AsyncConnection.connect(database.database_url) as conn:
            async with conn.transaction():
                await idempotency_keys.settle(
                    conn, [ending(key, "FAILED_RETRYABLE", {"outcome": "X"}, "UPSTREAM_TIMEOUT")], 30.0
                )
            settled = database.sql(
                "SELECT status, response, error_code, lease_owner, completed_at IS NOT NULL"
                " FROM toolgate.idempotency_keys WHERE idempotency_key = %s",
                (key,),
            )
            assert settled == [("FAILED_RETRYABLE", {"outcome": "X"}, "UPSTREAM_TIMEOUT", None, True)]
            async with conn.transaction():
                await idempotency_keys.redrive(conn, [redrive_row(key, b"\x00\xffraw")], "worker-2", 30.0)

    asyncio.run(settle_then_redrive())
    row = database.sql(
        "SELECT status, attempt, call_id, request, request_hash, lease_owner, lease_until > now(), completed_at"
        " FROM toolgate.idempotency_keys WHERE idempotency_key = %s",
        (key,),
    )
    assert row == [("PENDING", 2, "call-again", b"\x00\xffraw", "hash-2", "worker-2", True, None)]


PENDING_KEY = """
INSERT INTO toolgate.idempotency_keys (tenant_id, idempotency_key, request_hash, status, tool_name, tool_version,
    executor, call_id, home_partition, request, lease_owner, lease_until, expires_at)
VALUES ('acme', %s, 'hash-1', 'PENDING', 'notify.send_email', '1.0.0', 'http', 'call-first', 0, '\\x00',
    'worker-1', now() + interval '1 minute', now() + interval '1 day')
"""


def ending(key: str, status: str, response: dict[str, Any] | None, error_code: str | None = None) -> dict[str, Any]:
    return {
        "tenant_id": "acme",
        "idempotency_key": key,
        "status": status,
        "response": response,
        "error_code": error_code,
    }


def redrive_row(key: str, request: bytes) -> dict[str, Any]:
    return {
        "tenant_id": "acme",
        "idempotency_key": key,
        "attempt": 2,
        "call_id": "call-again",
        "request": request,
        "request_hash": "hash-2",
        "ttl": 86400,
    }
