"""Two execution workers, one idempotency key, one effect: the race at the database boundary.

Two ExecutionHandlers (each with its own connection pool and lease owner, as two worker
processes would have) handle calls that carry the same key at the same moment, against the
real Postgres. Exactly one invoice is written; the other call is told the operation is in
progress (IDEMPOTENCY_CONFLICT) or gets the stored result (idempotency_hit).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable

from tests.unit.factories import draft_key, record_of
from toolgate.contracts.registry import load_registry
from toolgate.schemas.codec import codec
from toolgate.schemas.hashing import payload_hash
from toolgate.schemas.models import PayloadKind, Principal, StageRecord
from toolgate.workers.execution.handler import ExecutionHandler
from toolgate.workers.runtime.emit import Emit, Origin
from toolgate.workers.runtime.handler import Inbound

from .conftest import Database

TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def draft_call(key: str, tenant: str, customer_id: str = "cust_acme01") -> Inbound[StageRecord]:
    arguments = {
        "customer_id": customer_id,
        "currency": "USD",
        "due_date": "2030-12-31",
        "memo": None,
        "lines": [{"description": "race", "quantity": 1, "unit_amount_cents": 100}],
    }
    record = record_of(
        call_id=f"call_{uuid.uuid4().hex}",
        traceparent=TRACE,
        home_partition=0,
        tenant_id=tenant,
        principal=Principal(user_id="u", agent_id="a"),
        workflow_id="w",
        run_id="r",
        logical_operation_id="op",
        tool_name="invoice.create_draft",
        tool_version="1.0.0",
        arguments=arguments,
        payload_hash=payload_hash(arguments),
        idempotency_key=key,
        created_at_ms=int(time.time() * 1000),
    )
    origin = Origin("executable", 0, 0, None, [], PayloadKind.STAGE_ITEM)
    return Inbound(record, codec().encode(record), origin, traceparent=TRACE)


async def with_handler(database: Database, work: Callable[[ExecutionHandler], Awaitable[None]]) -> None:
    """Run `work` with a started ExecutionHandler on `database`, closed after."""
    handler = ExecutionHandler(load_registry(), database.settings)
    await handler.start()
    try:
        await work(handler)
    finally:
        await handler.http.close()
        await handler.pool.close()


def handle_round(database: Database, calls: list[Inbound[StageRecord]]) -> Emit:
    """What one execution round of `calls` emits."""
    out = Emit("execution")

    async def work(handler: ExecutionHandler) -> None:
        await handler.handle(calls, out)

    asyncio.run(with_handler(database, work))
    return out


def test_two_workers_one_key_one_effect(database: Database) -> None:
    registry = load_registry()
    seen: list[tuple[str, ...]] = []

    async def race() -> None:
        one, two = ExecutionHandler(registry, database.settings), ExecutionHandler(registry, database.settings)
        await one.start()
        await two.start()
        try:
            for _ in range(25):
                key = f"race-{uuid.uuid4().hex}"
                a, b = draft_call(key, "acme"), draft_call(key, "acme")
                out_a, out_b = Emit("execution"), Emit("execution")
                await asyncio.gather(one.handle([a], out_a), two.handle([b], out_b))
                stored = draft_key(key, version="1.0.0")
                rows = database.sql("SELECT count(*) FROM demo.invoices WHERE operation_key = %s", (stored,))
                assert rows == [(1,)], f"{key}: {rows[0][0]} invoices"
                [(status, winner)] = database.sql(
                    "SELECT status, call_id FROM toolgate.idempotency_keys WHERE idempotency_key = %s", (key,)
                )
                assert status == "COMPLETED" and winner in (a.call_id, b.call_id)
                loser = out_b if winner == a.call_id else out_a
                winner_out = out_a if winner == a.call_id else out_b
                assert winner_out.outcomes[winner] == "SUCCESS"
                # The loser either saw the reservation in progress or, arriving after, the stored result.
                [loser_outcome] = loser.outcomes.values()
                assert loser_outcome in ("IDEMPOTENCY_CONFLICT", "SUCCESS")
                seen.append((loser_outcome,))
        finally:
            for handler in (one, two):
                await handler.http.close()
                await handler.pool.close()

    asyncio.run(race())
    print(
        f"losers: {sum(1 for s in seen if s == ('IDEMPOTENCY_CONFLICT',))} conflicts, "
        f"{sum(1 for s in seen if s == ('SUCCESS',))} replays of the stored result"
    )
