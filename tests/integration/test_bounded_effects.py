"""A Postgres effect runs bounded, on the session's real Postgres: a statement past the call's
time left is cut (TIMEOUT), a lock another transaction holds is waited on for half of it
(STALE_STATE lock_timeout), and a READ_ONLY tool's statement runs read-only, so one that writes
is refused (POLICY_VIOLATION mutation_class_violation), writes nothing, and quarantines its tool
version. Whatever a bound cut was rolled back by the server, and the transaction goes on: the
bounds are set back and the transaction is read-write again for toolgate's own writes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from tests.unit.factories import record_of, registry, stage_record
from toolgate.contracts.admission import admit
from toolgate.contracts.contract import Contract
from toolgate.contracts.registry import Registry
from toolgate.schemas.codec import codec
from toolgate.schemas.hashing import payload_hash
from toolgate.schemas.models import ExecutionResult, PayloadKind, Principal, StageRecord, TaxonomyClass
from toolgate.taxonomy import MUTATION_CLASS_VIOLATION
from toolgate.workers.approval.decision import approval_id_for
from toolgate.workers.execution.effects import Done, Effect, Failed, Job
from toolgate.workers.execution.executors import Refused, run_postgres_batch
from toolgate.workers.execution.handler import ExecutionHandler
from toolgate.workers.runtime import target_state
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
    with held_elsewhere(database, invoice):
        started = time.monotonic()
        [effect], after = run(database, [job(voids, invoice, 2000)])
        waited = time.monotonic() - started
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


BEFORE = (
    "SELECT invoice_id AS id, tenant_id, status, currency, amount_cents FROM demo.invoices "
    "WHERE invoice_id = ANY(%(ids)s)"
)


def voids_when_approved(version: str) -> Contract:
    """invoice.fetch made a write (VOIDS) held for one approval bound to the invoice's state: a
    standard-class tool with 2 s a call, whose approved effect re-reads its target FOR UPDATE."""
    document = json.loads(FETCH.read_text())
    contract = document["contract"]
    contract["identity"]["version"] = version
    contract["transactional"].update(
        side_effect_class="LOW_RISK_INTERNAL", semantics="idempotent_write", confirmation_required=True
    )
    contract["runtime"].update(timeout_ms=2000, max_retries=2)
    document["binding"]["timeout_class"] = "standard"
    document["binding"]["executor"]["statement"] = VOIDS
    document["binding"]["confirmation"] = {
        "action": "Void an invoice",
        "consequence": "Invoice {invoice_id} is voided.",
        "rejection_path": "The call ends with CONFIRMATION_MISSING; nothing changes.",
        "compensation": "None: a voided invoice stays void.",
        "expected_after_state": {"status": "void"},
        "before_state": {"argument": "invoice_id", "lookup": BEFORE},
    }
    return admit(document, f"invoice.fetch/{version}.json")


def approve_as_seen(database: Database, record: StageRecord, invoice: str) -> str:
    """An APPROVED ticket for the call, bound to its target's state as the approver saw it now."""
    with psycopg.connect(database.database_url, row_factory=dict_row) as conn:
        seen = target_state.version(conn.execute(BEFORE, {"ids": [invoice]}).fetchone())
    approval_id = approval_id_for(record.call.tenant_id, record.call.call_id)
    database.sql(
        "INSERT INTO toolgate.approvals (approval_id, call_id, tenant_id, run_id, tool_name, tool_version, "
        "payload_hash, risk_class, required_approvals, status, home_partition, request, packet, expires_at, "
        "state_version) VALUES (%s, %s, 'acme', %s, %s, %s, %s, 'MEDIUM_RISK_WRITE', 1, 'APPROVED', 0, %s, '{}', "
        "now() + interval '10 minutes', %s)",
        (
            approval_id,
            record.call.call_id,
            record.call.run_id,
            record.call.tool_name,
            record.call.tool_version,
            record.call.payload_hash,
            codec().encode(record),
            seen,
        ),
    )
    database.sql(
        "INSERT INTO toolgate.approval_decisions (decision_id, approval_id, approver_id, verdict, decided_at) "
        "VALUES (%s, %s, 'carol', 'APPROVE', now())",
        (f"dec_{uuid.uuid4().hex}", approval_id),
    )
    return approval_id


def execute(database: Database, tools: Registry, *calls: Inbound[StageRecord]) -> tuple[list[ExecutionResult], float]:
    """One round of the execution handler for the calls: the result it wrote for each, and how
    long the round took (from the calls' arrival: their deadlines start there)."""

    async def round_() -> float:
        handler = ExecutionHandler(tools, database.settings)
        await handler.start()
        try:
            started = time.monotonic()
            await handler.handle(list(calls), Emit("execution"))
            return time.monotonic() - started
        finally:
            await handler.http.close()
            await handler.pool.close()

    took = asyncio.run(round_())
    rows = database.sql("SELECT payload FROM toolgate.outbox WHERE topic = 'tool.results' ORDER BY id DESC LIMIT 20")
    results = [codec().decode(bytes(payload), ExecutionResult) for (payload,) in rows]
    return [next(r for r in results if r.call_id == call.model.call.call_id) for call in calls], took


@contextlib.contextmanager
def held_elsewhere(database: Database, invoice: str) -> Iterator[None]:
    """Another transaction holds the invoice's row FOR UPDATE while inside (6 s at most)."""
    locked, release = threading.Event(), threading.Event()

    def hold() -> None:
        with psycopg.connect(database.database_url) as conn, conn.transaction():
            conn.execute("SELECT 1 FROM demo.invoices WHERE invoice_id = %s FOR UPDATE", (invoice,))
            locked.set()
            release.wait(6)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert locked.wait(10)
        yield
    finally:
        release.set()
        holder.join()


def outcome_of(result: ExecutionResult) -> tuple[TaxonomyClass, list[str | None], bool]:
    return result.outcome.taxonomy_class, [e.code for e in result.errors], result.outcome.retryable


STATUS = "SELECT status FROM demo.invoices WHERE invoice_id = %s"
TICKET = "SELECT consumed_by IS NULL, spent_at IS NULL FROM toolgate.approvals WHERE approval_id = %s"


def test_an_approved_effects_target_held_elsewhere_is_waited_on_within_the_calls_deadline(database: Database) -> None:
    """The approved effect re-reads its target FOR UPDATE before it runs. Another transaction
    holds the row: the read waits half the call's 2 s, then the call is answered STALE_STATE
    lock_timeout, retryable, within its deadline; nothing ran, the ticket is neither consumed nor
    spent, and once the row is free the same call runs under it."""
    invoice = new_invoice(database)
    voids = voids_when_approved("1.9.6")
    tools = Registry([*registry(), voids])
    call = read_call(voids, invoice)
    approval_id = approve_as_seen(database, call.model, invoice)
    with held_elsewhere(database, invoice):
        [result], took = execute(database, tools, call)
    assert took < 2.0, f"the call was answered after {took:.2f} s, past its 2 s deadline"
    assert took > 0.8, f"answered after {took:.2f} s: the read should wait half the time left"
    assert outcome_of(result) == (TaxonomyClass.STALE_STATE, ["lock_timeout"], True)
    assert database.sql(STATUS, (invoice,)) == [("draft",)]
    assert database.sql(TICKET, (approval_id,)) == [(True, True)]
    key = "SELECT status FROM toolgate.idempotency_keys WHERE tenant_id = 'acme' AND idempotency_key = %s"
    assert database.sql(key, (call.model.call.idempotency_key,)) == [("FAILED_RETRYABLE",)]
    [again], _ = execute(database, tools, call)
    assert again.outcome.taxonomy_class == TaxonomyClass.SUCCESS
    assert database.sql(STATUS, (invoice,)) == [("void",)]
    assert database.sql(TICKET, (approval_id,)) == [(False, False)]


def test_of_approved_effects_read_together_only_the_one_whose_target_is_held_waits_it_out(database: Database) -> None:
    """Two approved calls in one round, one target held elsewhere: their read together is cut,
    each is read again on its own, and only the held one is answered lock_timeout; the other
    runs. Both are answered within their deadline."""
    free, held = new_invoice(database), new_invoice(database)
    voids = voids_when_approved("1.9.7")
    tools = Registry([*registry(), voids])
    calls = [read_call(voids, free), read_call(voids, held)]
    approvals = [
        approve_as_seen(database, call.model, invoice) for call, invoice in zip(calls, (free, held), strict=True)
    ]
    with held_elsewhere(database, held):
        results, took = execute(database, tools, *calls)
    assert took < 2.0, f"the calls were answered after {took:.2f} s, past their 2 s deadline"
    assert [outcome_of(r)[:2] for r in results] == [
        (TaxonomyClass.SUCCESS, []),
        (TaxonomyClass.STALE_STATE, ["lock_timeout"]),
    ]
    assert [database.sql(STATUS, (invoice,)) for invoice in (free, held)] == [[("void",)], [("draft",)]]
    assert [database.sql(TICKET, (approval,)) for approval in approvals] == [[(False, False)], [(True, True)]]
