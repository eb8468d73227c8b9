"""A Postgres effect runs bounded, on the session's real Postgres: a statement past the call's
time left is cut (TIMEOUT), a lock another transaction holds is waited on for half of it
(STALE_STATE lock_timeout), and a READ_ONLY tool's statement runs read-only, so one that writes
is refused (POLICY_VIOLATION mutation_class_violation), writes nothing, and quarantines its tool
version. Whatever a bound cut was rolled back by the server, and the transaction goes on: the
bounds are set back and the transaction is read-write again for toolgate's own writes."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.unit.factories import record_of, registry, stage_record
from toolgate.contracts.admission import admit
from toolgate.contracts.contract import Contract
from toolgate.contracts.registry import Registry
from toolgate.schemas.codec import codec
from toolgate.schemas.hashing import payload_hash
from toolgate.schemas.models import PayloadKind, Principal, StageRecord, TaxonomyClass
from toolgate.taxonomy import MUTATION_CLASS_VIOLATION
from toolgate.workers.execution.effects import Done, Effect, Failed, Job
from toolgate.workers.execution.executors import Refused, run_postgres_batch
from toolgate.workers.execution.handler import ExecutionHandler
from toolgate.workers.runtime.emit import Emit, Origin
from toolgate.workers.runtime.handler import Inbound

from .conftest import Database

REPO = Path(__file__).resolve().parents[2]
FETCH = REPO / "contracts" / "tools" / "invoice.fetch" / "1.0.0.json"
COLUMNS = "invoice_id, customer_id, status, currency, amount_cents, to_char(due_date, 'YYYY-MM-DD') AS due_date"
WHERE = "tenant_id = %(ctx.tenant_id)s AND invoice_id = %(args.invoice_id)s"
SLEEPS = f"SELECT {COLUMNS} FROM demo.invoices, pg_sleep(5) WHERE {WHERE}"
WRITES = f"UPDATE demo.invoices SET memo = 'written by a read' WHERE {WHERE} RETURNING {COLUMNS}"
VOIDS = f"UPDATE demo.invoices SET status = 'void' WHERE {WHERE} RETURNING {COLUMNS}"
TRACE = "00-" + "1" * 32 + "-" + "2" * 16 + "-01"


def fetch_like(version: str, statement: str, side_effect_class: str = "READ_ONLY", result: str = "row") -> Contract:
    """invoice.fetch at `version`, bound to `statement` giving `result`, declared `side_effect_class`."""
    document = json.loads(FETCH.read_text())
    document["contract"]["identity"]["version"] = version
    document["contract"]["transactional"]["side_effect_class"] = side_effect_class
    # admission holds read_only semantics to the READ_ONLY class, and only to it (contracts/honoured.py)
    semantics = "read_only" if side_effect_class == "READ_ONLY" else "idempotent_write"
    document["contract"]["transactional"]["semantics"] = semantics
    document["binding"]["executor"]["statement"] = statement
    document["binding"]["executor"]["result"] = result
    return admit(document, f"invoice.fetch/{version}.json")


def job(contract: Contract, invoice_id: str, left_ms: int, key: str = "") -> Job:
    record = stage_record(contract, {"invoice_id": invoice_id}, call_id=f"call_{uuid.uuid4().hex}")
    return Job(record, contract, key or f"k-{uuid.uuid4().hex}", int(time.time() * 1000) + left_ms)


def new_invoice(database: Database) -> str:
    invoice = f"inv_{uuid.uuid4().hex[:16]}"
    database.sql(
        "INSERT INTO demo.invoices (invoice_id, tenant_id, customer_id, status, currency, amount_cents) "
        "VALUES (%s, 'acme', 'cust_acme01', 'draft', 'USD', 100)",
        (invoice,),
    )
    return invoice


def run(database: Database, jobs: list[Job], careful: bool = True) -> tuple[list[Effect], dict[str, Any]]:
    """The effects, and what the transaction is like after them: its bounds, its access mode,
    and whether toolgate could still write in it."""

    async def batch() -> tuple[list[Effect], dict[str, Any]]:
        async with await psycopg.AsyncConnection.connect(database.database_url) as conn, conn.transaction():
            effects = await run_postgres_batch(conn, jobs, careful)
            after = {}
            for name in ("statement_timeout", "lock_timeout", "transaction_read_only"):
                after[name] = (await (await conn.execute(f"SHOW {name}")).fetchone() or [None])[0]
            await conn.execute("CREATE TEMP TABLE written (x int)")
            await conn.execute("INSERT INTO toolgate.read_outcomes VALUES ('acme', %s, 'h', '{}')", (uuid.uuid4().hex,))
            return effects, after

    return asyncio.run(batch())


def only_error(effect: Effect) -> tuple[TaxonomyClass, str, bool]:
    assert isinstance(effect, Failed), effect
    return effect.taxonomy, effect.errors[0].code or "", effect.final


def test_a_statement_past_its_time_left_is_cut_and_rolled_back(database: Database) -> None:
    slow = fetch_like("1.9.0", SLEEPS)
    started = time.monotonic()
    [effect], after = run(database, [job(slow, "inv_acme0001", 300)])
    assert time.monotonic() - started < 3.0, "the statement ran its 5 s"
    assert only_error(effect) == (TaxonomyClass.TIMEOUT, "statement_timeout", False)
    assert after == {"statement_timeout": "0", "lock_timeout": "0", "transaction_read_only": "off"}


def test_without_savepoints_a_statement_cut_makes_the_round_run_again(database: Database) -> None:
    slow = fetch_like("1.9.0", SLEEPS)
    with pytest.raises(Refused):
        run(database, [job(slow, "inv_acme0001", 300)], careful=False)


def test_a_lock_held_by_another_transaction_makes_lock_timeout_fire(database: Database) -> None:
    invoice = new_invoice(database)
    voids = fetch_like("1.9.1", VOIDS, "LOW_RISK_INTERNAL")
    locked, release = threading.Event(), threading.Event()

    def hold() -> None:
        with psycopg.connect(database.database_url) as conn, conn.transaction():
            conn.execute("SELECT 1 FROM demo.invoices WHERE invoice_id = %s FOR UPDATE", (invoice,))
            locked.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert locked.wait(10)
        started = time.monotonic()
        [effect], after = run(database, [job(voids, invoice, 2000)])
        waited = time.monotonic() - started
    finally:
        release.set()
        holder.join()
    assert only_error(effect) == (TaxonomyClass.STALE_STATE, "lock_timeout", False)
    assert 0.8 < waited < 1.8, f"waited {waited:.2f} s: the lock wait is bounded to half the time left"
    assert after["statement_timeout"] == "0" and after["lock_timeout"] == "0"
    assert database.sql("SELECT status FROM demo.invoices WHERE invoice_id = %s", (invoice,)) == [("draft",)]


def test_a_read_only_tool_that_writes_is_refused_and_writes_nothing(database: Database) -> None:
    invoice = new_invoice(database)
    writer = fetch_like("1.9.2", WRITES)
    honest = registry().get("invoice.fetch", "1.0.0")
    effects, after = run(database, [job(honest, invoice, 2000), job(writer, invoice, 2000), job(honest, invoice, 2000)])
    assert isinstance(effects[0], Done) and isinstance(effects[2], Done)
    assert only_error(effects[1]) == (TaxonomyClass.POLICY_VIOLATION, MUTATION_CLASS_VIOLATION, True)
    assert after["transaction_read_only"] == "off", "toolgate's own writes after the read must still run"
    assert database.sql("SELECT memo FROM demo.invoices WHERE invoice_id = %s", (invoice,)) == [(None,)]
    with pytest.raises(Refused):
        run(database, [job(writer, invoice, 2000)], careful=False)


def test_a_write_tool_is_not_held_read_only(database: Database) -> None:
    invoice = new_invoice(database)
    voids = fetch_like("1.9.3", VOIDS, "LOW_RISK_INTERNAL")
    [effect], _ = run(database, [job(voids, invoice, 2000)], careful=False)
    assert isinstance(effect, Done) and effect.data["status"] == "void"
    memo = f"UPDATE demo.invoices SET memo = 'counted' WHERE {WHERE}"
    counts = fetch_like("1.9.5", memo, "LOW_RISK_INTERNAL", "none")  # a result read after the pipeline's sync
    [effect], _ = run(database, [job(counts, invoice, 2000)], careful=False)
    assert effect == Done({"affected": 1})


def read_call(contract: Contract, invoice_id: str) -> Inbound[StageRecord]:
    arguments = {"invoice_id": invoice_id}
    record = record_of(
        call_id=f"call_{uuid.uuid4().hex}",
        traceparent=TRACE,
        home_partition=0,
        tenant_id="acme",
        principal=Principal(user_id="u", agent_id="a"),
        workflow_id="w",
        run_id="r",
        logical_operation_id=f"op_{uuid.uuid4().hex}",
        tool_name=contract.name,
        tool_version=contract.version,
        arguments=arguments,
        payload_hash=payload_hash(arguments),
        created_at_ms=int(time.time() * 1000),
    )
    origin = Origin("executable", 0, 0, None, [], PayloadKind.STAGE_ITEM)
    return Inbound(record, codec().encode(record), origin, traceparent=TRACE)


def test_execution_quarantines_a_read_only_tool_caught_writing(database: Database) -> None:
    invoice = new_invoice(database)
    writer = fetch_like("1.9.4", WRITES)
    tools = Registry([*registry(), writer])
    calls = [read_call(writer, invoice), read_call(tools.get("invoice.fetch", "1.0.0"), invoice)]
    out = Emit("execution")

    async def round_() -> None:
        handler = ExecutionHandler(tools, database.settings)
        await handler.start()
        try:
            await handler.handle(calls, out)
        finally:
            await handler.http.close()
            await handler.pool.close()

    asyncio.run(round_())
    assert [out.outcomes[c.model.call.call_id] for c in calls] == ["POLICY_VIOLATION", "SUCCESS"]
    assert database.sql("SELECT memo FROM demo.invoices WHERE invoice_id = %s", (invoice,)) == [(None,)]
    held = database.sql("SELECT actor, call_id, tenant_id FROM toolgate.tool_quarantine WHERE tool_version = '1.9.4'")
    assert held == [("execution", calls[0].model.call.call_id, "acme")]
    audited = database.sql(
        "SELECT actor, detail->>'version' FROM toolgate.audit_log WHERE action = 'tool_quarantined' AND call_id = %s",
        (calls[0].model.call.call_id,),
    )
    assert audited == [("execution", "1.9.4")]


def test_a_worker_may_quarantine_but_never_release(database: Database) -> None:
    with psycopg.connect(database.database_url, autocommit=True) as conn:
        conn.execute("SET ROLE toolgate_worker")
        conn.execute(
            "INSERT INTO toolgate.tool_quarantine (tool_name, tool_version, reason, actor) "
            "VALUES ('invoice.fetch', '9.9.9', 'test', 'execution')"
        )
        held = conn.execute("SELECT count(*) FROM toolgate.tool_quarantine WHERE tool_version = '9.9.9'")
        assert held.fetchone() == (1,)
        for release in ("DELETE FROM toolgate.tool_quarantine", "UPDATE toolgate.tool_quarantine SET reason = 'x'"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(release)
