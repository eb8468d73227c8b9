"""A validation round that is retried checks the same signed bytes again.

The runtime retries a whole round after a transient failure (Postgres restarting) and decides
call by call after any other: the handler sees the same Inbound objects again. It must never
have rewritten them with what the registry vouches for (tenant, narrowed scopes), or the
retry would find a signature that no longer verifies and dead-letter a genuine proposal.
Runs the real handler against a database of its own on the session's Postgres.
"""

from __future__ import annotations

import asyncio
import time
import uuid

from toolgate.contracts.registry import load_registry
from toolgate.schemas.codec import codec
from toolgate.schemas.models import PayloadKind, Principal, StageRecord, ToolProposal
from toolgate.trust.agent_keys import AgentKeyring
from toolgate.workers.runtime.emit import Emit, Origin
from toolgate.workers.runtime.handler import Inbound
from toolgate.workers.validation.handler import ValidationHandler

from .conftest import Database

TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def test_a_retried_round_admits_the_same_proposal_again(database: Database) -> None:
    signer = AgentKeyring(database.home / "agents").signer("cli")
    run_id = f"run_{uuid.uuid4().hex[:10]}"
    proposal = signer.sign(
        ToolProposal(
            call_id=f"call_{uuid.uuid4().hex}",
            tenant_id="acme",
            # More than cli was granted: the registry narrows it, the signature covers what was asked.
            principal=Principal(user_id="u", agent_id="cli", scopes=["invoices:read", "admin:everything"]),
            workflow_id=run_id,
            run_id=run_id,
            logical_operation_id="op",
            tool_name="invoice.fetch",
            arguments='{"invoice_id": "inv_acme0001"}',
            created_at_ms=int(time.time() * 1000),
        )
    )
    raw = codec().encode(proposal)
    call = Inbound(proposal, raw, Origin("proposals", 0, 0, None, [], PayloadKind.RECORD), traceparent=TRACE)

    async def twice() -> list[Emit]:
        handler = ValidationHandler(load_registry(), database.settings)
        await handler.start()
        try:
            outs = []
            for _ in range(2):  # the round, then its retry
                out = Emit("validation")
                await handler.handle([call], out)
                outs.append(out)
            return outs
        finally:
            await handler.pool.close()

    for out in asyncio.run(twice()):
        assert out.dead_letters == []
        [[item]] = out.items.values()
        record = codec().decode(item, StageRecord)
        assert (record.call.call_id, record.call.tenant_id, record.call.principal.scopes) == (
            proposal.call_id,
            "acme",
            ["invoices:read"],
        )
    assert call.model == proposal  # what arrived is untouched
