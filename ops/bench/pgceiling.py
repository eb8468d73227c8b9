"""`toolgate bench --postgres-only`: the ceiling Postgres alone puts on execution.

Runs exactly the SQL of the execution stage's rounds for invoice.create_draft (store/keys.py and
store/outbox.py), in a scratch database on the same server (created, migrated and dropped here, so
the running pipeline never sees its rows), with no Kafka, no decoding and no stage logic: one
transaction reads a round's keys under FOR UPDATE (none exists), runs the effects in one pipeline,
inserts the keys with their end and writes the outbox rows, as a round whose effects all run in
Postgres does. Several connections run rounds side by side, as several execution workers would.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from toolgate.contracts.registry import load_registry
from toolgate.ops.migrate import migrate, seed_demo
from toolgate.ops.roles import with_database
from toolgate.states import KeyStatus
from toolgate.store import databases
from toolgate.store.keys import INSERT_SETTLED, LOCK, settled_params
from toolgate.store.outbox import INSERT as OUTBOX_INSERT
from toolgate.store.outbox import OutboxRow, RowKind, columns
from toolgate.topics.catalog import Topics

TENANT = "acme"
REQUEST = b"\x00" * 400  # about an encoded StageRecord
PAYLOAD = b"\x00" * 450  # about an encoded ExecutionResult


def _round(conn: psycopg.Connection[Any], statement: str, arguments: dict[str, Any], batch: int) -> None:
    keys = [f"pg-{uuid.uuid4().hex}" for _ in range(batch)]
    reserve = [
        {
            "tenant_id": TENANT,
            "idempotency_key": k,
            "request_hash": "sha256:x",
            "tool_name": "invoice.create_draft",
            "tool_version": "1.0.0",
            "executor": "postgres",
            "call_id": k,
            "home_partition": 0,
            "request": REQUEST,
            "ttl": 86400,
        }
        for k in keys
    ]
    with conn.transaction():
        conn.execute(LOCK, ([TENANT] * batch, keys)).fetchall()
        with conn.pipeline():
            cursors = [conn.execute(statement, {**arguments, "ctx.operation_key": k, "ctx.call_id": k}) for k in keys]
        for cur in cursors:
            cur.fetchall()
        ended = {"status": KeyStatus.COMPLETED, "response": json.dumps({"data": {"ok": 1}}), "error_code": None}
        settled = [{**row, **ended} for row in reserve]
        conn.execute(INSERT_SETTLED, settled_params(settled, "pgceiling", 30)).fetchall()
        outbox = [OutboxRow("results", 0, RowKind.ITEM, None, PAYLOAD) for _ in keys]
        conn.execute(OUTBOX_INSERT, columns(outbox, Topics("")))


def measure(database_url: str, *, batch: int = 200, connections: int = 2, seconds: float = 10.0) -> dict[str, Any]:
    scratch = f"toolgate_pgceiling_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(database_url, autocommit=True) as admin:
        databases.create(admin, scratch)
    url = with_database(database_url, scratch)
    try:
        migrate(url)
        seed_demo(url)
        contract = load_registry().resolve("invoice.create_draft", "latest")
        example = dict(contract.document["affordance"]["examples"][0]["arguments"], memo=None)
        arguments = {f"args.{k}": Jsonb(v) if isinstance(v, dict | list) else v for k, v in example.items()}
        arguments.update({"ctx.tenant_id": TENANT, "ctx.user_id": "bench", "ctx.agent_id": "bench", "ctx.run_id": "r"})
        done = [0] * connections
        stop = time.monotonic() + seconds

        def worker(i: int) -> None:
            with psycopg.connect(url) as conn:
                while time.monotonic() < stop:
                    _round(conn, contract.executor["statement"], arguments, batch)
                    done[i] += batch

        started = time.monotonic()
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(connections)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - started
    finally:
        with psycopg.connect(database_url, autocommit=True) as admin:
            databases.drop(admin, scratch)
    return {
        "postgres_only": True,
        "batch": batch,
        "connections": connections,
        "seconds": round(elapsed, 1),
        "calls": sum(done),
        "calls_per_second": round(sum(done) / elapsed, 1),
    }
