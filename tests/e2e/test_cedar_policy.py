"""Cedar policies in the running policy stage (issue 51), through the real broker and Postgres:
the shipped argument rules (contracts/cedar/arguments.cedar) refuse a card charge over 10,000
USD, naming the rule to the agent and in the audit log, and ask two approvals of
`finance-directors` for one over 5,000 USD (the packet names the policy's groups, not the
contract's: a finance controller is not counted, two directors release it); a small charge is
held for its side-effect class's minimum and runs once approved. (A set that cannot be
admitted: test_policy_refused.py.)"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from toolgate.client import Proposed

from ..conftest import Pipeline
from .test_gates import Approvers, decision_audit, packet_of
from .test_pipeline import _approval_of, _ledger_for, errors_of, taxonomy

pytestmark = pytest.mark.timeout(180)


def charge(pipeline: Pipeline, cents: int) -> tuple[Proposed, dict[str, Any], str]:
    """A charge of `cents` USD on an open invoice of that amount (a charge settles its invoice),
    its arguments and its idempotency key."""
    arguments = {"invoice_id": pipeline.open_invoice(amount_cents=cents), "amount_cents": cents, "currency": "USD"}
    key = f"charge-{uuid.uuid4().hex}"
    return pipeline.propose("payment.charge_card", arguments, idempotency_key=key), arguments, key


def policy_detail(pipeline: Pipeline, arguments: dict[str, Any]) -> tuple[int, str]:
    """What the policy stage decided of a dry run of the charge: (approvals, its decision's detail)."""
    preview = pipeline.call("payment.charge_card", arguments, dry_run=True)
    assert taxonomy(preview) == "SUCCESS", preview
    shown = preview["result_payload"]["data"]
    decided = next(p for p in shown["preconditions"] if p["stage"] == "policy")
    return int(shown["impact"]["approvals_required"]), str(decided["detail"])


def test_a_charge_over_10000_usd_is_refused_naming_the_cedar_rule(pipeline: Pipeline) -> None:
    sent, _, _ = charge(pipeline, 1_500_000)
    observation = pipeline.wait(sent)
    assert (taxonomy(observation), errors_of(observation)) == ("POLICY_VIOLATION", [(None, "policy.charge-hard-limit")])
    [error] = observation["result_payload"]["errors"]
    assert error["message"] == "a card charge over 10,000 USD is never made by an agent; ask finance to charge it"
    assert observation["status"]["fail_closed"] is True
    audited = pipeline.sql(
        "SELECT detail->>'taxonomy', detail->>'code', detail->>'rule' FROM toolgate.audit_log "
        "WHERE call_id = %s AND action = 'refused'",
        (sent.call_id,),
    )
    assert audited == [("POLICY_VIOLATION", "policy.charge-hard-limit", "charge-hard-limit")]
    assert pipeline.sql("SELECT count(*) FROM toolgate.approvals WHERE call_id = %s", (sent.call_id,)) == [(0,)]
    assert pipeline.sql("SELECT count(*) FROM toolgate.usage_events WHERE run_id = %s", (sent.run_id,)) == [(0,)]


def test_a_charge_over_5000_usd_needs_two_finance_directors(pipeline: Pipeline) -> None:
    sent, arguments, key = charge(pipeline, 750_000)
    approval_id = _approval_of(pipeline, sent)
    packet = packet_of(pipeline, approval_id)
    assert (packet.required_approvals, packet.approver_groups) == (2, ["finance-directors"])  # not the contract's
    approvals, detail = policy_detail(pipeline, arguments)
    assert approvals == 2
    assert "groups:finance-directors" in detail.split(";"), detail  # the permit large-charge-needs-directors
    approvers = Approvers(pipeline)
    alice = approvers.decide(packet, "alice")  # a finance controller: the contract's group, not the policy's
    assert decision_audit(pipeline, alice.decision_id) == ("decision_refused", "approver_not_in_group")
    dave = approvers.decide(packet, "dave")
    assert decision_audit(pipeline, dave.decision_id) == ("decision_counted", "PENDING")
    erin = approvers.decide(packet, "erin")
    assert decision_audit(pipeline, erin.decision_id) == ("decision_counted", "APPROVED")
    approvers.close()
    assert taxonomy(pipeline.wait(sent)) == "SUCCESS"
    [charged] = _ledger_for(pipeline, key)
    assert (charged["kind"], charged["response"]["amount_cents"]) == ("charge", 750_000)


def test_a_small_charge_runs_with_its_classs_minimum_of_approvals(pipeline: Pipeline) -> None:
    sent, arguments, key = charge(pipeline, 50_000)
    approval_id = _approval_of(pipeline, sent)
    assert packet_of(pipeline, approval_id).required_approvals == 2  # CRITICAL_MUTATION's minimum
    approvals, detail = policy_detail(pipeline, arguments)
    assert approvals == 2 and "groups:" not in detail, detail  # no permit asked for approvers of its own
    for approver in ("alice", "bob"):
        done = pipeline.cli("approvals", "approve", approval_id, "--as", approver)
        assert done.returncode == 0, done.stdout + done.stderr
    observation = pipeline.wait(sent)
    assert taxonomy(observation) == "SUCCESS"
    [charged] = _ledger_for(pipeline, key)
    assert charged["kind"] == "charge"
