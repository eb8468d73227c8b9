"""An approver decides only for the tenants it is registered for (review N13): `judge` refuses
a decision on another tenant's ticket (`approver_not_for_tenant`), and it never counts."""

from __future__ import annotations

import pytest

from toolgate.refusal import Refusal
from toolgate.schemas.models import Verdict
from toolgate.states import TicketStatus
from toolgate.workers.approval.decision import Counted, judge, transition

from .test_approval_decision import NOW, approver, decision, ticket


@pytest.mark.parametrize(
    ("tenant", "tenants", "code"),
    [
        ("globex", ("acme",), "approver_not_for_tenant"),
        ("globex", (), "approver_not_for_tenant"),  # an approver of no tenant decides for no one
        ("acme", ("globex",), "approver_not_for_tenant"),
        ("acme", ("acme",), None),
        ("globex", ("acme", "globex"), None),
    ],
)
def test_an_approver_counts_only_on_the_tickets_of_its_tenants(
    tenant: str, tenants: tuple[str, ...], code: str | None
) -> None:
    verdict = judge(decision("alice"), ticket(tenant_id=tenant), approver("alice", tenants=tenants), NOW)
    if code is None:
        assert verdict == Counted(TicketStatus.PENDING, ("alice",))
    else:
        assert isinstance(verdict, Refusal) and verdict.code == code
        assert tenant in verdict.reason


@pytest.mark.parametrize("verdict", [Verdict.APPROVE, Verdict.DENY])
def test_another_tenants_approver_neither_approves_nor_denies(verdict: Verdict) -> None:
    held = ticket(tenant_id="globex", required_approvals=1)
    step = transition(decision("alice", verdict=verdict), held, approver("alice", tenants=("acme",)), NOW)
    assert (step.counted, step.ticket, step.action) == (False, held, "decision_refused")
    assert step.detail["code"] == "approver_not_for_tenant"
