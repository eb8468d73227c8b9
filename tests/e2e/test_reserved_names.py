"""toolgate's own principal names are reserved, and `setup --acls` covers the MCP door (review
N14), through the CLI against the running `toolgate up`: an agent named like a stage
(`toolgate-execution`), the operator or the door is refused and nothing is registered; so are
such tenants and approvers. The embedded broker has no authorizer, so what `--prune` deletes is
tested as pure logic (tests/unit/test_acl_prune.py); here it is refused as `--acls` is."""

from __future__ import annotations

import pytest

from ..conftest import Pipeline, session_broker, session_secure

pytestmark = pytest.mark.timeout(240)


def said(done: object) -> str:
    return " ".join(f"{done.stdout} {done.stderr}".split())  # type: ignore[attr-defined]


@pytest.mark.parametrize("agent", ["toolgate-execution", "toolgate-operator", "toolgate-mcp"])
def test_an_agent_named_like_one_of_toolgates_principals_is_refused(pipeline: Pipeline, agent: str) -> None:
    added = pipeline.cli("agents", "add", agent, "--tenant", "acme", "--scopes", "invoices:read")
    assert added.returncode == 1, said(added)
    assert f"agent id '{agent}' is reserved" in said(added)
    assert pipeline.sql("SELECT count(*) FROM toolgate.agents WHERE agent_id = %s", (agent,)) == [(0,)]
    assert not (pipeline.home / "agents" / agent).exists()


def test_tenants_and_approvers_named_like_toolgate_are_refused(pipeline: Pipeline) -> None:
    tenant = pipeline.cli("tenants", "add", "toolgate-internal")
    assert tenant.returncode == 1 and "tenant id 'toolgate-internal' is reserved" in said(tenant), said(tenant)
    approver = pipeline.cli("approvers", "add", "toolgate-validation", "--tenant", "acme")
    assert approver.returncode == 1 and "approver id 'toolgate-validation' is reserved" in said(approver)
    assert pipeline.sql("SELECT count(*) FROM toolgate.tenants WHERE tenant_id LIKE 'toolgate%'") == [(0,)]
    assert pipeline.sql("SELECT count(*) FROM toolgate.approvers WHERE approver_id LIKE 'toolgate%'") == [(0,)]


def test_the_plan_covers_the_mcp_door_and_prune_is_refused_on_the_embedded_broker(pipeline: Pipeline) -> None:
    done = pipeline.cli("setup", "--acls", "--dry-run", "--door", "User:door=acme")
    assert done.returncode == 0, said(done)
    lines = [" ".join(line.split()) for line in done.stdout.splitlines() if line.startswith("ALLOW")]
    assert "ALLOW User:door WRITE TOPIC LITERAL tool.proposals" in lines
    assert "ALLOW User:door READ TOPIC LITERAL tool.observations.acme" in lines
    assert not [line for line in lines if line.startswith("ALLOW User:door ") and "globex" in line]
    default = pipeline.cli("setup", "--acls", "--dry-run")
    assert "ALLOW User:toolgate-mcp READ TOPIC PREFIXED tool.observations." in " ".join(default.stdout.split())
    pruned = pipeline.cli("setup", "--acls", "--prune", "--dry-run")
    if session_broker()[0] == "tansu":  # the embedded broker has no authorizer
        assert pruned.returncode == 1 and "no authorizer" in said(pruned), said(pruned)
    elif session_secure():  # a secured Kafka has one: the dry run reads its bindings
        assert pruned.returncode == 0, said(pruned)
