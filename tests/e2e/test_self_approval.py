"""An approver is never counted on a call requested by the same person (issue 52, part 4), through
the running `toolgate up`: the demo's carol acts as the user `carol`; an email carol's agent
requested, approved by carol (signed with her real key, or through the CLI), is refused
(`self_approval`), is not recorded, and the call does not run until another approver, alice,
approves it; then it runs once. `approvers add --acts-as` and `approvers acts-as` link an
approver to users, audited, and `approvers list` shows them."""

from __future__ import annotations

import json
import uuid

import pytest

from ..conftest import Pipeline
from .test_approver_tenants import ok, said
from .test_gates import Approvers, decision_audit, packet_of, status_of
from .test_pipeline import _approval_of, _ledger_for, errors_of, taxonomy

pytestmark = pytest.mark.timeout(240)


def test_a_self_approval_is_refused_and_the_call_waits_for_another_approver(pipeline: Pipeline) -> None:
    listed = {r["approver"]: r for r in json.loads(ok(pipeline.cli("approvers", "list", "--json")).stdout)}
    assert (listed["carol"]["acts_as"], listed["alice"]["acts_as"]) == (["carol"], ["alice"])  # the demo's
    key = f"mail-{uuid.uuid4().hex[:8]}"
    email = {"to": "ap@acme.example", "subject": "Mine to send", "body": "Requested by carol herself."}
    sent = pipeline.propose("notify.send_email", email, user_id="carol", idempotency_key=key)
    approval_id = _approval_of(pipeline, sent)
    packet = packet_of(pipeline, approval_id)
    assert packet.requested_by.user_id == "carol"
    approvers = Approvers(pipeline)
    try:
        carol = approvers.decide(packet, "carol")  # a billing lead, for acme: all but the requester
        assert decision_audit(pipeline, carol.decision_id) == ("decision_refused", "self_approval")
        refused = pipeline.cli("approvals", "approve", approval_id, "--as", "carol", "--json")
        assert refused.returncode == 1, said(refused)
        judged = json.loads(refused.stdout)["judgment"]
        assert (judged["outcome"], judged["code"]) == ("refused", "self_approval"), judged
        assert status_of(pipeline, approval_id) == "PENDING"
        recorded = "SELECT count(*) FROM toolgate.approval_decisions WHERE approval_id = %s"
        assert pipeline.sql(recorded, (approval_id,)) == [(0,)]
        assert _ledger_for(pipeline, key) == []
        alice = approvers.decide(packet, "alice")
        assert decision_audit(pipeline, alice.decision_id) == ("decision_counted", "APPROVED")
    finally:
        approvers.close()
    final = pipeline.wait(sent)
    assert (taxonomy(final), errors_of(final)) == ("SUCCESS", [])
    assert len(_ledger_for(pipeline, key)) == 1
    assert pipeline.sql(
        "SELECT approver_id FROM toolgate.approval_decisions WHERE approval_id = %s", (approval_id,)
    ) == [("alice",)]


def test_an_approver_is_linked_to_the_users_it_acts_as(pipeline: Pipeline) -> None:
    name = f"frank-{uuid.uuid4().hex[:8]}"
    ok(
        pipeline.cli(
            "approvers", "add", name, "--tenant", "acme", "--acts-as", "u_frank", "--acts-as", "f@acme.example"
        )
    )
    bad = pipeline.cli("approvers", "acts-as", name, "--user", "two words")
    assert bad.returncode == 1 and "is not a user id" in said(bad), said(bad)
    neither = pipeline.cli("approvers", "acts-as", name)
    assert neither.returncode != 0 and "--none" in said(neither), said(neither)
    ok(pipeline.cli("approvers", "acts-as", name, "--user", "u_frank2", "--as", "sec-ops"))
    listed = {r["approver"]: r for r in json.loads(ok(pipeline.cli("approvers", "list", "--json")).stdout)}
    assert listed[name]["acts_as"] == ["u_frank2"]
    ok(pipeline.cli("approvers", "acts-as", name, "--none"))
    listed = {r["approver"]: r for r in json.loads(ok(pipeline.cli("approvers", "list", "--json")).stdout)}
    assert listed[name]["acts_as"] == []
    audited = pipeline.sql(
        "SELECT action, actor, detail->'acts_as', detail->'previous_acts_as' FROM toolgate.audit_log "
        "WHERE stage = 'registry' AND detail->>'approver' = %s ORDER BY id",
        (name,),
    )
    assert audited == [
        ("approver_registered", "operator", ["f@acme.example", "u_frank"], None),
        ("approver_acts_as_changed", "sec-ops", ["u_frank2"], ["f@acme.example", "u_frank"]),
        ("approver_acts_as_changed", "operator", [], ["u_frank2"]),
    ]
