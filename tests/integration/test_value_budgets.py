"""Value budgets' reservations (issue 51 part 2; migration 0026, store/values.py) on the session's
real Postgres: the policy round reserves a charge's money in its transaction, under the tenant's
lock, so policy rounds running at once never spend past the limit; an operation reserves once
however often retried; a release is applied once however often asked, gives the value back to the
day it was reserved on, and lets a retry reserve again only when the operation did not end."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import psycopg
from aiohttp import web

from tests.unit.factories import stage_record
from toolgate.contracts.budgets import BUDGETS_FILE, load_budgets
from toolgate.contracts.cedar_policy import policy_files
from toolgate.contracts.policy_set import load_policy_set
from toolgate.contracts.registry import load_registry
from toolgate.schemas.codec import codec
from toolgate.schemas.hashing import operation_event, payload_hash
from toolgate.schemas.models import PayloadKind, StageRecord
from toolgate.store import batch, values
from toolgate.topics.catalog import Topics
from toolgate.workers.approval.sweep import expire_approvals
from toolgate.workers.policy.handler import PolicyHandler
from toolgate.workers.runtime.emit import Emit, Origin
from toolgate.workers.runtime.handler import Inbound

from .conftest import Database
from .loopback_provider import reconciler_asking
from .test_reconciliation_locks import stuck_key

TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
DAY = "SELECT coalesce(sum(used), 0)::bigint FROM toolgate.usage_value_daily WHERE tenant_id = %s AND dimension = %s"


def policy_dir(tmp_path: Path, per_day: dict[str, int]) -> Path:
    """The shipped Cedar set with budgets whose value limits per tenant per day are `per_day`."""
    directory = tmp_path / f"policies-{uuid.uuid4().hex[:6]}"
    directory.mkdir()
    for source, text in policy_files():
        (directory / Path(source).name).write_text(text)
    document = load_budgets().document
    document["value_budgets"] = {"per_run": {}, "per_tenant_per_day": per_day}
    (directory / BUDGETS_FILE).write_text(json.dumps(document))
    return directory


def charges(database: Database, tenant: str, count: int, cents: int) -> list[StageRecord]:
    """`count` charges of `cents` USD, each on an open invoice of its own, each its own operation."""
    contract = load_registry().resolve("payment.charge_card", "latest")
    customer = {"acme": "cust_acme02", "globex": "cust_globex01"}[tenant]
    records = []
    for _ in range(count):
        invoice = f"inv_{uuid.uuid4().hex[:16]}"
        database.sql(
            "INSERT INTO demo.invoices (invoice_id, tenant_id, customer_id, status, currency, amount_cents) "
            "VALUES (%s, %s, %s, 'open', 'USD', %s)",
            (invoice, tenant, customer, cents),
        )
        arguments = {"invoice_id": invoice, "amount_cents": cents, "currency": "USD"}
        call_id = f"call_{uuid.uuid4().hex}"
        records.append(
            stage_record(
                contract,
                arguments,
                call_id=call_id,
                tenant_id=tenant,
                run_id=f"run_{uuid.uuid4().hex[:8]}",
                logical_operation_id=f"op_{uuid.uuid4().hex[:8]}",
                traceparent=TRACE,
                payload_hash=payload_hash(arguments),
            )
        )
    return records


async def decide(handler: PolicyHandler, records: list[StageRecord]) -> Emit:
    validated = Origin("validated", 0, 0, None, [], PayloadKind.STAGE_ITEM)
    out = Emit("policy")
    calls = [Inbound(r, codec().encode(r), validated, traceparent=TRACE) for r in records]
    await handler.handle(calls, out)
    return out


def test_policy_rounds_at_once_spend_a_days_money_budget_exactly_to_its_limit(
    database: Database, tmp_path: Path
) -> None:
    """Four policy handlers (pools of their own, as four workers) decide 48 charges of 1,250 USD
    at once, in rounds of 3, against 20,000 USD a day: exactly 16 are allowed, the rest refused
    BUDGET_EXHAUSTED, and what is reserved is exactly the limit."""
    registry = load_registry()
    limit = 2_000_000
    policy_set = load_policy_set(registry, policy_dir(tmp_path, {"money:USD": limit}))
    records = charges(database, "acme", 48, 125_000)

    async def run() -> list[Emit]:
        handlers = [PolicyHandler(registry, database.settings, policy_set) for _ in range(4)]
        for handler in handlers:
            await handler.start()
        try:
            rounds = [records[i : i + 3] for i in range(0, len(records), 3)]
            return list(await asyncio.gather(*(decide(handlers[i % 4], r) for i, r in enumerate(rounds))))
        finally:
            for handler in handlers:
                await handler.pool.close()

    outs = asyncio.run(run())
    allowed = [call_id for out in outs for call_id in out.keys]
    refused = {call_id: res for out in outs for call_id, res in out.ended.items()}
    assert len(allowed) == 16 and len(refused) == 32
    assert {res.outcome.taxonomy_class for res in refused.values()} == {"BUDGET_EXHAUSTED"}
    message = next(iter(refused.values())).errors[0].message
    assert message.startswith("the money:USD budget per tenant per day would be exceeded: 2000000 of 2000000"), message
    assert database.sql(DAY, ("acme", "money:USD")) == [(limit,)]
    reserved = database.sql("SELECT count(*), sum(amount) FROM toolgate.usage_values WHERE dimension = 'money:USD'")
    assert reserved == [(16, limit)]


async def in_transaction(url: str, statements: list[batch.Statement]) -> list[batch.Result]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn, batch.transaction(conn):
        results = await batch.run(conn, [batch.BEGIN, *statements, batch.COMMIT])
    return results[1:-1]


def test_an_operation_reserves_once_and_is_released_once(database: Database) -> None:
    url = database.database_url
    event = f"op_{uuid.uuid4().hex}"
    run = ("acme", "cli", f"run_{uuid.uuid4().hex[:6]}")
    reservation = values.of_call(event, run, [("money:EUR", 4_000)])
    before = database.sql(DAY, ("acme", "money:EUR"))[0][0]

    def day() -> Any:
        return database.sql(DAY, ("acme", "money:EUR"))[0][0] - before

    def read() -> values.Read:
        return values.read(asyncio.run(in_transaction(url, values.reads(["acme"], [run], [event]))))

    for _ in range(2):  # a retry of the operation: reserved once
        asyncio.run(in_transaction(url, [values.reserve(reservation)]))
    assert day() == 4_000 and read().per_run == {(*run, "money:EUR"): 4_000}

    async def release_twice_at_once() -> None:
        async def one() -> None:
            async with await psycopg.AsyncConnection.connect(url) as conn:
                await values.release(conn, [event, "op_never_reserved"], ended=False)
                await conn.commit()

        await asyncio.gather(one(), one())

    asyncio.run(release_twice_at_once())
    assert day() == 0 and read().per_run == {} and read().released == {event}
    asyncio.run(in_transaction(url, [values.reserve(reservation)]))  # its retry, allowed again
    asyncio.run(in_transaction(url, [values.reserve(reservation)]))  # and that retry's retry
    assert day() == 4_000 and read().released == set()

    for _ in range(2):  # the operation ends for good: released once, and never reserved again
        asyncio.run(in_transaction(url, [values.release_statement([event], ended=True)]))
    asyncio.run(in_transaction(url, [values.reserve(reservation)]))
    assert day() == 0 and read().released == set() and read().per_run == {}
    assert database.sql("SELECT ended FROM toolgate.usage_values WHERE event_id = %s", (event,)) == [(True,)]


def test_an_approval_that_expires_releases_what_its_call_reserved(database: Database) -> None:
    """The expiry sweep (approval-wait's, and reconciliation's backstop) AUTO_DENIES a ticket past
    its expiry and releases its call's money in the same transaction; the operation did not end
    (a retry may be approved), and a second sweep changes nothing."""
    [record] = charges(database, "acme", 1, 7_000)
    event = operation_event(record.call)
    run = ("acme", record.call.principal.agent_id, record.call.run_id)
    url = database.database_url
    asyncio.run(in_transaction(url, [values.reserve(values.of_call(event, run, [("money:GBP", 7_000)]))]))
    database.sql(
        "INSERT INTO toolgate.approvals (approval_id, call_id, tenant_id, run_id, tool_name, tool_version, "
        "payload_hash, risk_class, required_approvals, status, home_partition, request, packet, created_at, "
        "expires_at) VALUES (%s, %s, 'acme', %s, 'payment.charge_card', '1.0.0', 'h', 'CRITICAL_MUTATION', 2, "
        "'PENDING', 0, %s, '{}', now() - interval '1 hour', now() - interval '1 second')",
        (f"apr_{uuid.uuid4().hex}", record.call.call_id, record.call.run_id, codec().encode(record)),
    )
    gbp = ("acme", "money:GBP")

    async def sweep() -> int:
        async with await psycopg.AsyncConnection.connect(url) as conn, conn.transaction():
            return await expire_approvals(conn, Topics(""), "approval-wait")

    assert database.sql(DAY, gbp) == [(7_000,)]
    assert asyncio.run(sweep()) == 1
    assert database.sql(DAY, gbp) == [(0,)]
    released = "SELECT released_at IS NOT NULL, ended FROM toolgate.usage_values WHERE event_id = %s"
    assert database.sql(released, (event,)) == [(True, False)]
    assert asyncio.run(sweep()) == 0 and database.sql(DAY, gbp) == [(0,)]


def test_a_charge_the_provider_says_failed_releases_its_money_when_reconciled(
    database: Database, tmp_path: Path
) -> None:
    """A charge whose execution worker died mid-call (its key PENDING past its lease): the
    reconciler asks the provider, which says the call failed; the key ends FAILED_FINAL and the
    charge's money is released for good in the same transaction."""
    url = database.database_url
    key, _ = stuck_key(url)
    [(request,)] = database.sql("SELECT request FROM toolgate.idempotency_keys WHERE idempotency_key = %s", (key,))
    call = codec().decode(bytes(request), StageRecord).call
    event = operation_event(call)
    run = (call.tenant_id, call.principal.agent_id, call.run_id)
    asyncio.run(in_transaction(url, [values.reserve(values.of_call(event, run, [("money:CHF", 9_000)]))]))
    chf = (call.tenant_id, "money:CHF")
    assert database.sql(DAY, chf) == [(9_000,)]

    async def failed(_: web.Request) -> web.Response:
        return web.json_response({"status": "failed"})

    async def reconcile() -> dict[str, int]:
        async with reconciler_asking(url, tmp_path, failed) as reconciler:
            return await reconciler.reconcile_once()

    assert asyncio.run(reconcile())["failed_final"] == 1
    status = "SELECT status FROM toolgate.idempotency_keys WHERE idempotency_key = %s"
    assert database.sql(status, (key,)) == [("FAILED_FINAL",)]
    released = "SELECT released_at IS NOT NULL, ended FROM toolgate.usage_values WHERE event_id = %s"
    assert database.sql(released, (event,)) == [(True, True)]
    assert database.sql(DAY, chf) == [(0,)]
