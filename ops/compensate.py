"""`toolgate compensate CALL_ID`: undo the committed effect of an earlier call.

Reads the earlier call's idempotency record (its request and result), builds the call of
the compensation tool its contract names, with the arguments its binding's template
derives, and proposes it through the pipeline like any call, signed by an agent of the
call's tenant (by default the agent that made the call, if its key is on this machine):
validation, policy and execution gates apply, it has its own idempotency key (so compensating
twice is one compensation), and execution marks the earlier key COMPENSATED when it succeeds.
"""

from __future__ import annotations

import json

import psycopg

from toolgate.client import Proposed, ToolgateClient
from toolgate.contracts.registry import load_registry
from toolgate.kafka_security import agent_role
from toolgate.schemas.codec import codec
from toolgate.schemas.models import StageRecord
from toolgate.settings import Settings
from toolgate.states import KeyStatus
from toolgate.store import keys as idempotency_keys
from toolgate.workers.execution.compensation import arguments_for


def compensate(
    settings: Settings, call_id: str, tenant: str | None = None, agent: str | None = None
) -> tuple[Proposed, ToolgateClient]:
    """Propose the compensation of `call_id`, signed as `agent` (the call's own unless given);
    the proposal, and the client that made it (connected as that agent) to wait with."""
    with psycopg.connect(settings.database_url) as conn:
        rows = idempotency_keys.executed(conn, call_id, tenant)
    if not rows:
        raise SystemExit(f"no executed call {call_id}" + (f" of tenant {tenant}" if tenant else ""))
    if len(rows) > 1:
        raise SystemExit(f"call {call_id} exists in several tenants; name one with --tenant")
    found = rows[0]
    tenant_id, tool_name, tool_version = found.tenant_id, found.tool_name, found.tool_version
    if found.status not in (KeyStatus.COMPLETED, KeyStatus.COMPENSATED):  # COMPENSATED: the same one again replays
        raise SystemExit(f"call {call_id} is {found.status}: there is no committed effect to compensate")
    registry = load_registry(settings.contracts_dir)
    contract = registry.get(tool_name, tool_version)
    tool = contract.document["transactional"]["compensation_tool"]
    template = (contract.binding.get("compensation") or {}).get("arguments")
    if not tool or template is None:
        raise SystemExit(f"{tool_name} {tool_version} names no compensation tool and arguments")
    original = codec().decode(found.request, StageRecord)
    arguments = arguments_for(template, original.call.arguments, (found.response or {}).get("data") or {})
    scopes = list(registry.resolve(tool, "latest").required_scopes)
    agent = agent or original.call.principal.agent_id
    client = ToolgateClient.from_settings(settings, client_id="toolgate-compensate", role=agent_role(agent))
    try:
        signer = client.signer(agent)
    except KeyError:
        raise SystemExit(
            f"agent {agent} has no key on this machine; name an agent of {tenant_id} with --agent"
        ) from None
    sent = client.propose(
        tool,
        json.dumps(arguments),
        signer=signer,
        tenant_id=tenant_id,
        user_id=original.call.principal.user_id,
        scopes=scopes,
        run_id=original.call.run_id,
        workflow_id=original.call.workflow_id,
        logical_operation_id=f"compensate:{call_id}",
        compensation_of=call_id,
        watch=True,
    )
    return sent, client
