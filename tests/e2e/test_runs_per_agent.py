"""A run is its agent's own (N12), through the real broker and Postgres.

Per-run budgets and the repair loop were keyed by (tenant, run_id), and the run_id is whatever an
agent names: fifty failing proposals from another agent of acme in `victim-run` made cli's first
mistake there BUDGET_EXHAUSTED (repair_loop_exhausted), and ten emails from it spent the run's
external-action budget. Runs are keyed by (tenant, agent, run_id): what another agent does under
the same run_id touches neither.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from toolgate.client import Proposed
from toolgate.trust.agent_keys import AgentKeyring

from ..conftest import Pipeline
from .test_gates import EMAIL, Approvers, packet_of
from .test_pipeline import errors_of, taxonomy

pytestmark = pytest.mark.timeout(240)


def other_agent(pipeline: Pipeline) -> str:
    """Another agent of acme, beside the demo's cli."""
    agent = f"temp-{uuid.uuid4().hex[:8]}"
    scopes = "invoices:read,invoices:write,notify:send"
    done = pipeline.cli("agents", "add", agent, "--tenant", "acme", "--scopes", scopes)
    assert done.returncode == 0, done.stderr
    return agent


def propose_as(pipeline: Pipeline, agent: str, tool: str, arguments: Any, **kwargs: Any) -> Proposed:
    signer = AgentKeyring(pipeline.home / "agents").signer(agent)
    return pipeline.client.propose(tool, arguments, signer=signer, user_id="u", watch=True, **kwargs)


def test_another_agents_failures_under_the_same_run_id_leave_the_repair_loop_alone(pipeline: Pipeline) -> None:
    run_id, temp = f"victim-run-{uuid.uuid4().hex[:8]}", other_agent(pipeline)
    failing = [
        propose_as(pipeline, temp, "invoice.fetch", {"invoice_id": 42}, run_id=run_id, logical_operation_id=f"op{i}")
        for i in range(50)
    ]
    answers = [taxonomy(pipeline.wait(s)) for s in failing]
    assert answers[0] == "TYPE_MISMATCH" and answers[-1] == "BUDGET_EXHAUSTED"  # its own run's loop ended
    mistake = pipeline.call("invoice.fetch", {"invoice_id": 42}, run_id=run_id, logical_operation_id="op-cli")
    assert (taxonomy(mistake), errors_of(mistake)) == ("TYPE_MISMATCH", [("invoice_id", "type_mismatch")])
    assert mistake["status"]["repairable"] is True
    repaired = pipeline.call("invoice.fetch", {"invoice_id": "inv_acme0001"}, run_id=run_id)
    assert taxonomy(repaired) == "SUCCESS"
    recorded = pipeline.sql(
        "SELECT agent_id, count(*) FROM toolgate.repair_attempts WHERE tenant_id = 'acme' AND run_id = %s "
        "GROUP BY 1 ORDER BY 1",
        (run_id,),
    )
    assert recorded == sorted([("cli", 1), (temp, 50)])


def test_another_agents_spending_under_the_same_run_id_leaves_the_runs_budget_alone(pipeline: Pipeline) -> None:
    run_id, temp = f"victim-run-{uuid.uuid4().hex[:8]}", other_agent(pipeline)
    sent = [propose_as(pipeline, temp, "notify.send_email", EMAIL, run_id=run_id) for _ in range(10)]
    held = [pipeline.wait(s, final=False) for s in sent]
    approvers = Approvers(pipeline)
    try:
        assert [a["status"]["code"] for a in held] == [202] * 10  # its run's ten external actions
        spent = propose_as(pipeline, temp, "notify.send_email", EMAIL, run_id=run_id)
        assert errors_of(pipeline.wait(spent)) == [(None, "budget.external_action")]
        # cli's run of the same name has spent nothing: a dry run of its first email shows 1 of 10.
        preview = pipeline.call("notify.send_email", EMAIL, run_id=run_id, dry_run=True)
        assert taxonomy(preview) == "SUCCESS", errors_of(preview)
        policy = next(p for p in preview["result_payload"]["data"]["preconditions"] if p["stage"] == "policy")
        assert "external_action per_run: 1 of 10" in policy["detail"]
        runs = pipeline.sql(
            "SELECT agent_id, dimension, used FROM toolgate.usage_runs WHERE tenant_id = 'acme' AND run_id = %s",
            (run_id,),
        )
        assert runs == [(temp, "external_action", 10)]
    finally:
        for answer in held:  # leave nothing waiting on an approver
            if answer["status"]["code"] == 202:
                packet = packet_of(pipeline, answer["result_payload"]["data"]["approval"]["approval_id"])
                approvers.decide(packet, "carol", approve=False, reason="run budget test")
        approvers.close()
