"""The postgres executor's batch on the session's real Postgres: each call's effect is its own,
in the calls' order, whether its statement went out with others of its kind (`executemany`) or
alone, and a refused statement spoils none of the other calls of its round."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg

from tests.unit.factories import draft_id, first_example, registry, stage_record
from toolgate.schemas.models import TaxonomyClass
from toolgate.workers.execution.effects import Done, Effect, Failed, Job
from toolgate.workers.execution.executors import run_postgres_batch

from .conftest import Database


def job(tool: str, key: str, **arguments: Any) -> Job:
    contract = registry().resolve(tool, "latest")
    args = {**first_example(contract), **arguments}
    return Job(stage_record(contract, args, call_id=f"call_{key}"), contract, key, 2**53)


def invoice_of(key: str) -> str:
    """The id invoice.create_draft's statement gives the draft of idempotency key `key` (acme's)."""
    return draft_id(key)


def run(database: Database, jobs: list[Job]) -> list[Effect]:
    async def batch() -> list[Effect]:
        async with await psycopg.AsyncConnection.connect(database.database_url) as conn, conn.transaction():
            return await run_postgres_batch(conn, jobs)

    return asyncio.run(batch())


def test_each_call_gets_its_own_rows_in_order_across_statements(database: Database) -> None:
    jobs = [
        job("invoice.create_draft", "k1"),
        job("invoice.create_draft", "k2"),
        job("invoice.create_draft", "k3"),
        job("invoice.fetch", "f1", invoice_id=invoice_of("k2")),
        job("invoice.void_draft", "v1", invoice_id=invoice_of("k2")),
        job("invoice.fetch", "f2", invoice_id=invoice_of("k2")),
        job("invoice.fetch", "f3", invoice_id="inv_none"),
        job("invoice.create_draft", "k4"),
    ]
    effects = run(database, jobs)
    assert [type(e) for e in effects] == [Done, Done, Done, Done, Done, Done, Failed, Done]
    done = [e.data if isinstance(e, Done) else None for e in effects]
    assert [d["invoice_id"] for d in (done[0], done[1], done[2], done[7]) if d] == [
        invoice_of(k) for k in ("k1", "k2", "k3", "k4")
    ]
    assert done[3] is not None and (done[3]["invoice_id"], done[3]["status"]) == (invoice_of("k2"), "draft")
    assert done[4] == {"invoice_id": invoice_of("k2"), "status": "void"}
    assert done[5] is not None and done[5]["status"] == "void"  # run after the void, as ordered
    refused = effects[6]
    assert isinstance(refused, Failed) and refused.taxonomy is TaxonomyClass.STALE_STATE


def test_a_refused_statement_spoils_none_of_the_others(database: Database) -> None:
    jobs = [
        job("invoice.create_draft", "r1"),
        job("invoice.create_draft", "r2", customer_id="cust_nobody"),  # no such customer: refused
        job("invoice.create_draft", "r3"),
    ]
    effects = run(database, jobs)
    assert isinstance(effects[0], Done) and effects[0].data["invoice_id"] == invoice_of("r1")
    assert isinstance(effects[1], Failed) and effects[1].taxonomy is TaxonomyClass.STALE_STATE
    assert isinstance(effects[2], Done) and effects[2].data["invoice_id"] == invoice_of("r3")
