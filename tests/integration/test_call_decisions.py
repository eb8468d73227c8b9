"""Every decision names its inputs (issue 51, part 3; migration 0027), on the session's real
Postgres, through the real validation and policy handlers: a refused proposal's record is written
by validation, a passed call's by policy with its own decision (the contracts' and the policy
set's digests, the call as validated, the facts and usage it saw); the policy's record goes in
the round's transaction (a record that fails takes the round's usage with it) and in the round's
final batch (no round trip more); `toolgate policy decided CALL_ID` shows them."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
import pytest

from toolgate.contracts.registry import load_registry
from toolgate.schemas.codec import codec
from toolgate.schemas.models import PayloadKind, Principal, StageRecord, ToolProposal
from toolgate.store import batch, call_decisions
from toolgate.trust.agent_keys import AgentKeyring
from toolgate.workers.policy import handler as policy_handler
from toolgate.workers.policy.handler import PolicyHandler
from toolgate.workers.runtime.emit import Emit, Origin
from toolgate.workers.runtime.handler import Inbound
from toolgate.workers.validation.handler import ValidationHandler

from .conftest import Database

TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
COLUMNS = "stage, outcome, taxonomy_class, code, contracts_digest, policy_digest"


def proposal(database: Database, tool: str, arguments: str) -> Inbound[ToolProposal]:
    signer = AgentKeyring(database.home / "agents").signer("cli")
    run_id = f"run_{uuid.uuid4().hex[:10]}"
    signed = signer.sign(
        ToolProposal(
            call_id=f"call_{uuid.uuid4().hex}",
            tenant_id="acme",
            principal=Principal(user_id="u", agent_id="cli", scopes=["invoices:read", "payments:charge"]),
            workflow_id=run_id,
            run_id=run_id,
            logical_operation_id=f"op_{uuid.uuid4().hex[:8]}",
            tool_name=tool,
            arguments=arguments,
            created_at_ms=int(time.time() * 1000),
        )
    )
    origin = Origin("proposals", 0, 0, None, [], PayloadKind.RECORD)
    return Inbound(signed, codec().encode(signed), origin, traceparent=TRACE)


def validated(out: Emit) -> list[Inbound[StageRecord]]:
    origin = Origin("validated", 0, 0, None, [], PayloadKind.STAGE_ITEM)
    found = []
    for (topic, _), items in out.items.items():
        if topic == "validated":
            for item in items:
                record = codec().decode(item, StageRecord)
                found.append(Inbound(record, item, origin, traceparent=TRACE))
    return found


def run(database: Database, work: Callable[[ValidationHandler, PolicyHandler], Awaitable[Any]]) -> Any:
    async def go() -> Any:
        registry = load_registry()
        validation, policy = ValidationHandler(registry, database.settings), PolicyHandler(registry, database.settings)
        await validation.start()
        await policy.start()
        try:
            return await work(validation, policy)
        finally:
            await validation.pool.close()
            await policy.pool.close()

    return asyncio.run(go())


def recorded(database: Database, call_id: str) -> list[tuple[Any, ...]]:
    return database.sql(f"SELECT {COLUMNS} FROM toolgate.call_decisions WHERE call_id = %s ORDER BY stage", (call_id,))


def test_each_stage_records_its_decision_naming_the_versions_and_inputs(database: Database) -> None:
    fetch = proposal(database, "invoice.fetch", '{"invoice_id": "inv_acme0001"}')
    wrong = proposal(database, "invoice.fetch", '{"invoice_id": 7}')

    async def work(validation: ValidationHandler, policy: PolicyHandler) -> tuple[str, str, dict[str, bytes]]:
        out = Emit("validation")
        await validation.handle([fetch, wrong], out)
        judged = validated(out)
        await policy.handle(judged, Emit("policy"))
        return policy.registry.digest, policy.set.digest, {c.model.call.call_id: c.raw for c in judged}

    contracts, policy_set, validated_bytes = run(database, work)
    assert recorded(database, wrong.model.call_id) == [
        ("validation", "refuse", "TYPE_MISMATCH", "type_mismatch", contracts, None)
    ]
    assert recorded(database, fetch.model.call_id) == [  # validation's pass is inside the policy's record
        ("policy", "allow", None, None, contracts, policy_set),
    ]
    [(call, record, facts, usage)] = database.sql(
        "SELECT call, record, facts, usage FROM toolgate.call_decisions WHERE call_id = %s AND stage = 'policy'",
        (fetch.model.call_id,),
    )
    assert call is None and bytes(record) == validated_bytes[fetch.model.call_id]  # the bytes policy judged
    judged = codec().decode(bytes(record), StageRecord).call
    assert judged.arguments == {"invoice_id": "inv_acme0001"} and judged.tenant_id == "acme"
    assert facts["environment"] and facts["quarantined"] is False
    (resource,) = facts["resources"]
    assert resource["id"] == "inv_acme0001" and resource["row"]["tenant_id"] == "acme"
    assert set(usage) == {
        "run",
        "tenant_today",
        "rate",
        "event_id",
        "counted_before",
        "values_run",
        "values_today",
        "released",
    }

    shown = cli(database, "policy", "decided", fetch.model.call_id, "--json")
    assert shown.returncode == 0, shown.stderr
    decided = json.loads(shown.stdout)
    assert [(d["stage"], d["outcome"], d["contracts_digest"], d["policy_digest"]) for d in decided] == [  # in order
        ("validation", "pass", contracts, None),
        ("policy", "allow", contracts, policy_set),
    ]
    assert decided[1]["call"]["arguments"] == {"invoice_id": "inv_acme0001"} and decided[1]["record"] is None
    text = cli(database, "policy", "decided", fetch.model.call_id)
    assert f"policy set {policy_set}" in " ".join(text.stdout.split()), text.stdout


def test_the_record_is_written_in_the_rounds_transaction_and_final_batch(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two batches for a round of allowed calls, as before: the record adds no round trip. And a
    record Postgres refuses rolls back the round's usage with it: one transaction."""
    batches: list[int] = []
    real_run = batch.run

    async def counting(conn: Any, statements: Any) -> Any:
        batches.append(len(statements))
        return await real_run(conn, statements)

    calls = [proposal(database, "invoice.fetch", '{"invoice_id": "inv_acme0001"}') for _ in range(2)]

    async def work(validation: ValidationHandler, policy: PolicyHandler) -> None:
        out = Emit("validation")
        await validation.handle(calls, out)
        monkeypatch.setattr(policy_handler.batch, "run", counting)
        await policy.handle(validated(out), Emit("policy"))

    run(database, work)
    assert len(batches) == 2
    assert all(recorded(database, c.model.call_id) for c in calls)

    boom = proposal(database, "invoice.fetch", '{"invoice_id": "inv_acme0001"}')
    database.sql(
        "CREATE OR REPLACE FUNCTION public.refuse_one() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        f"IF NEW.call_id = '{boom.model.call_id}' THEN RAISE EXCEPTION 'refused'; END IF; RETURN NEW; END $$"
    )
    database.sql(
        "CREATE TRIGGER refuse_one BEFORE INSERT ON toolgate.call_decisions "
        "FOR EACH ROW EXECUTE FUNCTION public.refuse_one()"
    )
    try:
        events_before = database.sql("SELECT count(*) FROM toolgate.usage_events")

        async def failing(validation: ValidationHandler, policy: PolicyHandler) -> None:
            out = Emit("validation")
            await validation.handle([boom], out)
            with pytest.raises(Exception, match="refused"):
                await policy.handle(validated(out), Emit("policy"))

        run(database, failing)
        assert database.sql("SELECT count(*) FROM toolgate.usage_events") == events_before
        assert recorded(database, boom.model.call_id) == []
    finally:
        database.sql("DROP TRIGGER refuse_one ON toolgate.call_decisions")


def cli(database: Database, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("TOOLGATE_")},
        "TOOLGATE_HOME": str(database.home),
        "TOOLGATE_DATABASE_URL": database.database_url,
        "TOOLGATE_KAFKA_BOOTSTRAP": "127.0.0.1:9",  # required to be set; the command never uses it
    }
    return subprocess.run(
        [sys.executable, "-m", "toolgate.cli", *args], env=env, capture_output=True, text=True, timeout=60
    )


def test_whatif_reads_its_window_a_part_at_a_time_oldest_first(database: Database) -> None:
    """`since` pages through a server-side cursor: every decision of the window comes, in the order
    made, and no part is larger than asked (a window of any length in bounded memory)."""
    tenant = f"t_{uuid.uuid4().hex[:8]}"
    start = int(time.time() * 1000)
    for i in range(5):
        database.sql(
            "INSERT INTO toolgate.call_decisions (tenant_id, call_id, stage, decided_at_ms, tool_name, tool_version, "
            "outcome) VALUES (%s, %s, 'policy', %s, 'invoice.fetch', '1.0.0', 'allow')",
            (tenant, f"call_{i}", start + i),
        )

    async def parts() -> list[list[str]]:
        async with await psycopg.AsyncConnection.connect(database.database_url) as conn:
            await conn.set_read_only(True)
            async with conn.transaction():
                return [[r.call_id for r in rows] async for rows in call_decisions.since(conn, start, tenant, 2)]

    assert asyncio.run(parts()) == [["call_0", "call_1"], ["call_2", "call_3"], ["call_4"]]
