"""Withdrawals (workers/approval/withdrawal.py): a held call's own agent takes it back, proven by
its signature, never by the topic it came on; and what approval-wait says about it again."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from toolgate.client.withdrawals import withdrawal
from toolgate.refusal import Refusal
from toolgate.schemas.codec import codec
from toolgate.schemas.models import ApprovalDecision, ApprovalRequest, ExecutionResult, Verdict
from toolgate.states import TicketStatus
from toolgate.trust.ed25519 import PrivateKey
from toolgate.trust.signing import new_key, public_bytes, signed_bytes, withdrawer, withdrawing_agent
from toolgate.workers.approval import resume
from toolgate.workers.approval import withdrawal as w
from toolgate.workers.approval.decision import Counted, NoOp, Then, Ticket

from .factories import registry, sample_models, stage_record
from .test_approval_decision import HASH, NOW, ticket

KEYS = {name: new_key() for name in ("cli", "other")}
PACKET: ApprovalRequest = sample_models()[ApprovalRequest].model_copy(
    update={
        "approval_id": "appr_1",
        "tool_name": "payment.charge_card",
        "tool_version": "1.0.0",
        "payload_hash": HASH,
        "state_version": None,
        "trace_id": "",
    }
)


def requester(name: str = "cli", *, active: bool = True, tenant: str = "acme") -> w.Requester:
    return w.Requester(name, tenant, active, (public_bytes(KEYS[name]),))


def withdrawn(agent: str = "cli", *, key: str | None = None, **changes: object) -> ApprovalDecision:
    unsigned = withdrawal(PACKET, agent, "changed my mind", NOW - 1000).model_copy(update=changes)
    signer = PrivateKey.of(KEYS[key or agent])
    return unsigned.model_copy(update={"signature": signer.sign(signed_bytes(unsigned))})


def held() -> Ticket:
    return ticket(requesting_agent="cli", approved_by=("alice",), decided_by=("alice",))


def test_a_withdrawal_names_its_agent_where_an_approver_id_stands() -> None:
    assert withdrawer("cli") == "agent:cli" and withdrawing_agent("agent:cli") == "cli"
    assert withdrawing_agent("alice") is None
    decision = withdrawn()
    assert decision.decision is Verdict.DENY and decision.approver_id == "agent:cli"
    assert (decision.payload_hash, decision.approval_id) == (HASH, "appr_1")


def test_the_calls_own_agent_withdraws_it_and_the_ticket_closes_denied() -> None:
    verdict = w.judge(withdrawn(), held(), requester(), NOW)
    assert verdict == Counted(TicketStatus.DENIED, ("alice",))
    step = w.transition(withdrawn(), held(), requester(), NOW)
    assert (step.counted, step.then, step.action) == (True, Then.WITHDRAW, "withdrawal_counted")
    assert step.ticket is not None and step.ticket.status == TicketStatus.DENIED


@pytest.mark.parametrize(
    ("decision", "who", "code"),
    [
        (lambda: withdrawn(key="other"), lambda: requester(), "bad_signature"),  # the call's name, another key
        (lambda: withdrawn("other"), lambda: requester("other"), "not_the_requester"),  # another agent, its own key
        (lambda: withdrawn("other"), lambda: requester("other", tenant="globex"), "not_the_requester"),
        (lambda: withdrawn(), lambda: requester(active=False), "unknown_approver"),
        (lambda: withdrawn(), lambda: None, "unknown_approver"),
        (lambda: withdrawn(decision=Verdict.APPROVE), lambda: requester(), "withdrawal_not_deny"),
        (lambda: withdrawn(payload_hash="sha256:" + "d" * 64), lambda: requester(), "payload_mismatch"),
        (lambda: withdrawn(expires_at_ms=NOW - 1), lambda: requester(), "decision_expired"),
    ],
)
def test_a_withdrawal_that_does_not_prove_the_calls_agent_is_refused(
    decision: Callable[[], ApprovalDecision], who: Callable[[], w.Requester | None], code: str
) -> None:
    verdict = w.judge(decision(), held(), who(), NOW)
    assert isinstance(verdict, Refusal) and verdict.code == code
    step = w.transition(decision(), held(), who(), NOW)
    assert (step.counted, step.then, step.action) == (False, Then.NOTHING, "withdrawal_refused")


@pytest.mark.parametrize("status", [TicketStatus.APPROVED, TicketStatus.DENIED, TicketStatus.AUTO_DENIED])
def test_a_withdrawal_after_the_ticket_closed_is_too_late(status: TicketStatus) -> None:
    verdict = w.judge(withdrawn(), replace(held(), status=status), requester(), NOW)
    assert isinstance(verdict, Refusal) and verdict.code == "approval_closed"


def test_a_withdrawal_delivered_twice_counts_once() -> None:
    decision = withdrawn()
    again = replace(held(), used_decisions=frozenset({decision.decision_id}))
    assert isinstance(w.judge(decision, again, requester(), NOW), NoOp)
    assert isinstance(w.judge(decision, None, requester(), NOW), Refusal)


def test_requesters_keep_only_active_keys() -> None:
    rows = [
        ("cli", "acme", True, b"a" * 32, True),
        ("cli", "acme", True, b"b" * 32, False),
        ("x", "acme", False, None, None),
    ]
    found = w.requesters(rows)
    assert found["cli"] == w.Requester("cli", "acme", True, (b"a" * 32,))
    assert found["x"] == w.Requester("x", "acme", False, ())


def test_a_withdrawn_ticket_said_again_is_withdrawn_again() -> None:
    record = stage_record(registry().get("notify.send_email", "1.0.0"), required_approvals=1, approval_id="apr_1")
    held_again = resume.Held("apr_1", TicketStatus.DENIED, record, PACKET, (), "agent:cli", "changed my mind")
    [row] = resume.again(held_again, "tp", now=1)
    [error] = codec().decode(row.payload, ExecutionResult).errors
    assert (error.code, error.actual) == ("approval_withdrawn", "withdrawn")
    assert "the requesting agent cli withdrew the call: changed my mind" in error.message
