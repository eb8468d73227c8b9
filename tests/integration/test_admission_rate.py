"""Each agent's validation work is rationed before the gates (N7), in the real validation handler
against a database of its own on the session's Postgres: an agent whose expensive refusals spent
its budget has its next calls refused RATE_LIMITED, with the time to wait, answered to it and
audited, while another agent's calls in the same round go through; once it has waited, it is
served again."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import replace

from toolgate.contracts.registry import load_registry
from toolgate.schemas.codec import codec
from toolgate.schemas.models import ExecutionResult, PayloadKind, Principal, StageRecord, ToolProposal
from toolgate.trust.agent_keys import AgentKeyring
from toolgate.workers.runtime.emit import Emit, Origin
from toolgate.workers.runtime.handler import Inbound
from toolgate.workers.validation.handler import ValidationHandler

from .conftest import Database

TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
BAD = {"description": "", "quantity": 0, "unit_amount_cents": -1}
BIG = json.dumps({"customer_id": "cust_acme01", "currency": "USD", "due_date": "2030-12-31", "lines": [BAD] * 4000})


def signed(database: Database, agent: str, tool: str, arguments: str, at: int) -> Inbound[ToolProposal]:
    signer = AgentKeyring(database.home / "agents").signer(agent)
    run_id = f"run_{uuid.uuid4().hex[:8]}"
    proposal = signer.sign(
        ToolProposal(
            call_id=f"call_{uuid.uuid4().hex}",
            tenant_id=signer.tenant_id,
            principal=Principal(user_id="u", agent_id=agent, scopes=["invoices:read", "invoices:write"]),
            workflow_id=run_id,
            run_id=run_id,
            logical_operation_id="op",
            tool_name=tool,
            arguments=arguments,
            created_at_ms=int(time.time() * 1000),
        )
    )
    origin = Origin("proposals", 0, at, None, [], PayloadKind.RECORD)
    return Inbound(proposal, codec().encode(proposal), origin, traceparent=TRACE)


def answers(out: Emit) -> dict[str, ExecutionResult | StageRecord]:
    found: dict[str, ExecutionResult | StageRecord] = {}
    for (topic, _), items in out.items.items():
        for item in items:
            model = codec().decode(item, ExecutionResult if topic == "results" else StageRecord)
            found[model.call_id if isinstance(model, ExecutionResult) else model.call.call_id] = model
    return found


def test_an_agent_past_its_work_is_refused_before_the_gates_and_others_are_not(database: Database) -> None:
    # ~1,900 units a 240 KiB refusal; 5,000 to spend, refilled at 1,000 a second.
    settings = replace(database.settings, admission_work_per_second=1000.0, admission_work_burst=5000.0)
    fetch = json.dumps({"invoice_id": "inv_acme0001"})
    big = [signed(database, "cli", "invoice.create_draft", BIG, i) for i in range(5)]
    others = signed(database, "globex-cli", "invoice.fetch", json.dumps({"invoice_id": "inv_globex0001"}), 5)
    small = signed(database, "cli", "invoice.fetch", fetch, 6)
    later = signed(database, "cli", "invoice.fetch", fetch, 7)

    async def rounds() -> tuple[Emit, Emit]:
        handler = ValidationHandler(load_registry(), settings)
        await handler.start()
        try:
            first = Emit("validation")
            await handler.handle([*big, others, small], first)
            limited = answers(first)[small.model.call_id]
            assert isinstance(limited, ExecutionResult)
            await asyncio.sleep((limited.outcome.retry_after_ms or 0) / 1000 + 0.2)
            second = Emit("validation")
            await handler.handle([later], second)
            return first, second
        finally:
            await handler.pool.close()

    first, second = asyncio.run(rounds())
    seen = answers(first)
    outcomes = [seen[c.model.call_id] for c in big]
    assert [o.outcome.taxonomy_class for o in outcomes if isinstance(o, ExecutionResult)] == [
        "OUT_OF_BOUNDS",
        "OUT_OF_BOUNDS",
        "OUT_OF_BOUNDS",
        "RATE_LIMITED",
        "RATE_LIMITED",
    ]
    assert isinstance(seen[others.model.call_id], StageRecord)  # globex's agent: validated
    limited = seen[small.model.call_id]
    assert isinstance(limited, ExecutionResult) and limited.outcome.taxonomy_class == "RATE_LIMITED"
    assert limited.outcome.retryable and 0 < (limited.outcome.retry_after_ms or 0) <= 2000
    assert [(e.field, e.code) for e in limited.errors] == [(None, "admission_rate")]
    assert limited.proposal_digest and limited.tenant_id == "acme"
    refused = database.sql(
        "SELECT call_id, tenant_id, detail->>'taxonomy', detail->>'code', detail->>'proven' FROM toolgate.audit_log "
        "WHERE action = 'refused' AND call_id = ANY(%s) ORDER BY call_id",
        ([big[3].model.call_id, big[4].model.call_id, small.model.call_id],),
    )
    assert sorted(refused) == sorted(
        (c.model.call_id, "acme", "RATE_LIMITED", "admission_rate", "true") for c in (big[3], big[4], small)
    )
    assert isinstance(answers(second)[later.model.call_id], StageRecord)  # out of debt: served again


def test_a_copy_of_a_call_seen_before_is_dropped_not_refused_while_its_agent_is_in_debt(database: Database) -> None:
    # One answer per call: the copy's first delivery was answered (validated), so a RATE_LIMITED
    # refusal now would be a second, contradictory final for the same call.
    settings = replace(database.settings, admission_work_per_second=1000.0, admission_work_burst=5000.0)
    seen_before = signed(database, "cli", "invoice.fetch", json.dumps({"invoice_id": "inv_acme0001"}), 0)
    big = [signed(database, "cli", "invoice.create_draft", BIG, i) for i in range(1, 5)]

    async def rounds() -> tuple[Emit, Emit]:
        handler = ValidationHandler(load_registry(), settings)
        await handler.start()
        try:
            first, second = Emit("validation"), Emit("validation")
            await handler.handle([seen_before], first)
            await handler.handle([*big, seen_before], second)  # its agent spends its work, then the copy
            return first, second
        finally:
            await handler.pool.close()

    first, second = asyncio.run(rounds())
    assert isinstance(answers(first)[seen_before.model.call_id], StageRecord)
    assert seen_before.model.call_id not in answers(second)  # not answered again
    assert [o.outcome.taxonomy_class for o in answers(second).values() if isinstance(o, ExecutionResult)].count(
        "RATE_LIMITED"
    ) == 1  # the last new call of the round
    # Audited collapsed with the other refusals that anyone could replay (workers/runtime/refusals.py).
    dropped = [r.entry.detail for r in second.refusals if r.entry.detail.get("code") == "copy_of_bound_call"]
    assert [(d["refusal"], d["answered"]) for d in dropped] == [("admission_rate", False)]
