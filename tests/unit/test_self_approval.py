"""An approver is never counted on a call requested by the same person (issue 52, part 4):
`judge` refuses a decision by an approver who acts as the held call's requesting user
(`self_approval`), approve or deny; the ticket stays as it was, PENDING for the others, and the
refusal is audited one row (the decision is signed: it proves who made it)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from toolgate.ops.approvers import _users
from toolgate.ops.registry import RegistryError
from toolgate.refusal import Refusal
from toolgate.schemas.models import Verdict
from toolgate.states import TicketStatus
from toolgate.workers.approval.decision import Counted, judge, proves_nobody, transition

from .test_approval_decision import NOW, approver, decision, ticket


@pytest.mark.parametrize(
    ("requested_by", "acts_as", "code"),
    [
        ("u_alice", ("u_alice",), "self_approval"),
        ("alice@acme.example", ("u_alice", "alice@acme.example"), "self_approval"),
        ("u_bob", ("u_alice",), None),
        ("u_alice", (), None),  # an approver linked to no user is no one's requester
        ("", ("u_alice",), None),
    ],
)
def test_an_approver_acting_as_the_requester_is_refused(
    requested_by: str, acts_as: tuple[str, ...], code: str | None
) -> None:
    alice = replace(approver("alice"), acts_as=list(acts_as))
    verdict = judge(decision("alice"), ticket(requested_by=requested_by), alice, NOW)
    if code is None:
        assert verdict == Counted(TicketStatus.PENDING, ("alice",))
    else:
        assert isinstance(verdict, Refusal) and verdict.code == code
        assert "requested this call" in verdict.reason and requested_by not in verdict.reason


@pytest.mark.parametrize("verdict", [Verdict.APPROVE, Verdict.DENY])
def test_a_self_approval_neither_approves_nor_denies_and_leaves_the_ticket_pending(verdict: Verdict) -> None:
    held = ticket(requested_by="u_alice", required_approvals=1)
    alice = replace(approver("alice"), acts_as=["u_alice"])
    step = transition(decision("alice", verdict=verdict), held, alice, NOW)
    assert (step.counted, step.ticket, step.action) == (False, held, "decision_refused")
    assert step.detail["code"] == "self_approval" and step.outcome == "refused:self_approval"
    assert not proves_nobody(decision("alice", verdict=verdict), step, alice)  # audited as hers
    other = transition(decision("bob"), held, approver("bob"), NOW)
    assert (other.counted, other.detail["status_after"]) == (True, "APPROVED")


def test_a_self_approval_after_another_approval_does_not_complete_it() -> None:
    held = ticket(requested_by="u_bob", approved_by=("alice",), decided_by=("alice",))
    bob = replace(approver("bob"), acts_as=["u_bob"])
    verdict = judge(decision("bob"), held, bob, NOW)
    assert isinstance(verdict, Refusal) and verdict.code == "self_approval"
    assert judge(decision("carol"), held, approver("carol"), NOW) == Counted(TicketStatus.APPROVED, ("alice", "carol"))


@pytest.mark.parametrize("bad", ["", " ", "u 1", "u\n", "x" * 257, "u\x00"])
def test_a_user_id_an_approver_acts_as_is_a_plain_id(bad: str) -> None:
    with pytest.raises(RegistryError, match="is not a user id"):
        _users(["u_ok", bad])
    assert _users(["u_b", "alice@acme.example", "u_b"]) == ["alice@acme.example", "u_b"]
