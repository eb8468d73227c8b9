"""An agent's revocation is final, and its MCP tokens go with it (review N11): `agents add` of a
revoked agent, or of a revoked key, is refused and changes nothing; the agent's tokens are
revoked in the same transaction (audited), can still be listed and revoked afterwards, and a
token issued before the revocation never opens the door again (`agent_of`, what the MCP door
asks of every HTTP request), through the CLI against the running `toolgate up`."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

from toolgate.ops.agent_tokens import agent_of
from toolgate.trust.signing import new_key, public_bytes

from ..conftest import Pipeline

pytestmark = pytest.mark.timeout(240)


def door_says(pipeline: Pipeline, token: str) -> tuple[str, str] | None:
    """Whom the MCP door takes a bearer token for, as it asks Postgres on every request."""

    async def ask() -> tuple[str, str] | None:
        async with await psycopg.AsyncConnection.connect(pipeline.database_url, autocommit=True) as conn:
            return await agent_of(conn, token)

    return asyncio.run(ask())


def registered(pipeline: Pipeline, agent: str) -> tuple[Any, ...]:
    [row] = pipeline.sql("SELECT status, scopes FROM toolgate.agents WHERE agent_id = %s", (agent,))
    return (row[0], list(row[1]))


def ok(done: Any) -> Any:
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def test_a_revoked_agent_is_never_added_again_and_its_token_never_works_again(pipeline: Pipeline) -> None:
    agent = f"temp-{uuid.uuid4().hex[:8]}"
    ok(pipeline.cli("agents", "add", agent, "--tenant", "acme", "--scopes", "invoices:read"))
    token = json.loads(ok(pipeline.cli("agents", "token", agent)).stdout)["token"]
    assert door_says(pipeline, token) == (agent, "acme")

    ok(pipeline.cli("agents", "revoke", agent, "--as", "sec-ops"))
    assert door_says(pipeline, token) is None
    again = pipeline.cli("agents", "add", agent, "--tenant", "acme", "--scopes", "invoices:read,payments:charge")
    assert again.returncode == 1, again.stdout + again.stderr
    assert f"agent {agent} was revoked, and a revocation is final" in " ".join(again.stdout.split())
    assert registered(pipeline, agent) == ("revoked", ["invoices:read"])  # no new grant either
    assert door_says(pipeline, token) is None

    # The token went with the agent, in the same transaction, and the audit log says so.
    assert [t["status"] for t in json.loads(ok(pipeline.cli("agents", "token", agent, "--list")).stdout)] == ["revoked"]
    actions = pipeline.sql(
        "SELECT action, actor FROM toolgate.audit_log WHERE stage = 'registry' AND detail->>'agent' = %s ORDER BY id",
        (agent,),
    )
    assert actions == [
        ("agent_registered", "operator"),
        ("agent_token_issued", "operator"),
        ("agent_revoked", "sec-ops"),
        ("agent_token_revoked", "sec-ops"),
    ]
    # A revoked agent's tokens may still be revoked (none is left) and never issued.
    assert "0 token(s) revoked" in ok(pipeline.cli("agents", "token", agent, "--revoke")).stdout
    assert pipeline.cli("agents", "token", agent).returncode == 1
    assert door_says(pipeline, token) is None


def test_a_revoked_key_is_never_made_active_again(pipeline: Pipeline, tmp_path: Path) -> None:
    agent = f"temp-{uuid.uuid4().hex[:8]}"
    first = tmp_path / "first.hex"
    first.write_text(public_bytes(new_key()).hex())
    added = ok(pipeline.cli("agents", "add", agent, "--tenant", "acme", "--public-key", str(first)))
    key_id = added.stdout.split("key ", 1)[1].split(",", 1)[0]
    ok(pipeline.cli("agents", "rotate", agent))
    ok(pipeline.cli("agents", "revoke", agent, "--key", key_id))

    again = pipeline.cli("agents", "add", agent, "--tenant", "acme", "--public-key", str(first))
    assert again.returncode == 1, again.stdout + again.stderr
    assert f"key {key_id} of agent {agent} was revoked" in " ".join(again.stdout.split())
    status = "SELECT status FROM toolgate.agent_keys WHERE agent_id = %s AND key_id = %s"
    assert pipeline.sql(status, (agent, key_id)) == [("revoked",)]
