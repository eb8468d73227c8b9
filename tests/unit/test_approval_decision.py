"""Approval decisions (workers/approval/decision.py) and confirmation packets (packet.py)."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.unit.factories import FAST, registry, stage_record
from toolgate.contracts.contract import Contract
from toolgate.refusal import Refusal
from toolgate.schemas.codec import codec
from toolgate.schemas.models import ApprovalDecision, PayloadKind, StageRecord, Verdict
from toolgate.settings import Settings
from toolgate.states import TicketStatus
from toolgate.trust.signing import new_key, public_bytes, sign, signed_bytes, verify
from toolgate.workers.approval.decision import (
    Approver,
    Counted,
    NoOp,
    Then,
    Ticket,
    approval_id_for,
    judge,
    transition,
)
from toolgate.workers.approval.packet import (
    approver_groups,
    confirmation_packet,
    escalated,
    expiry_for,
    next_escalation_ms,
    opening,
)
from toolgate.workers.approval.tickets import ticket_row
from toolgate.workers.policy.case import Allow
from toolgate.workers.policy.handler import PolicyHandler
from toolgate.workers.runtime.emit import Emit, Origin
from toolgate.workers.runtime.handler import Inbound

NOW = 1_700_000_000_000
HASH = "sha256:" + "c" * 64
KEYS = {name: new_key() for name in ("alice", "bob", "carol", "mallory")}


def approver(
    name: str,
    *,
    risk: tuple[str, ...] = ("CRITICAL_MUTATION", "HIGH_RISK_EXTERNAL"),
    active: bool = True,
    groups: tuple[str, ...] = (),
    tenants: tuple[str, ...] = ("acme",),
) -> Approver:
    return Approver(name, public_bytes(KEYS[name]), list(risk), active, list(groups), list(tenants), [])


def ticket(**overrides: object) -> Ticket:
    base = Ticket(
        approval_id="appr_1",
        tenant_id="acme",
        tool_name="payment.charge_card",
        tool_version="1.0.0",
        payload_hash=HASH,
        risk_class="CRITICAL_MUTATION",
        required_approvals=2,
        status=TicketStatus.PENDING,
        expires_at_ms=NOW + 60_000,
    )
    return replace(base, **overrides)  # type: ignore[arg-type]


def decision(
    name: str = "alice", *, verdict: Verdict = Verdict.APPROVE, key: str | None = None, **overrides: object
) -> ApprovalDecision:
    fields: dict[str, object] = dict(
        decision_id=f"dec_{name}",
        approval_id="appr_1",
        decision=verdict,
        approver_id=name,
        tool_name="payment.charge_card",
        tool_version="1.0.0",
        payload_hash=HASH,
        reason=None,
        decided_at_ms=NOW - 1000,
        expires_at_ms=NOW + 30_000,
        signature=b"",
    )
    fields.update(overrides)
    return sign(ApprovalDecision(**fields), KEYS[key or name])  # type: ignore[arg-type]


def test_signature_round_trip() -> None:
    d = decision()
    assert len(d.signature) == 64
    assert verify(d, public_bytes(KEYS["alice"]))
    assert not verify(d, public_bytes(KEYS["bob"]))
    assert not verify(d, b"short")


def test_unknown_ticket() -> None:
    result = judge(decision(), None, approver("alice"), NOW)
    assert isinstance(result, Refusal) and result.code == "unknown_approval"


@pytest.mark.parametrize("who", [None, "inactive"])
def test_unknown_or_revoked_approver(who: str | None) -> None:
    a = None if who is None else approver("alice", active=False)
    result = judge(decision(), ticket(), a, NOW)
    assert isinstance(result, Refusal) and result.code == "unknown_approver"


def test_signed_by_another_key() -> None:
    result = judge(decision("alice", key="mallory"), ticket(), approver("alice"), NOW)
    assert isinstance(result, Refusal) and result.code == "bad_signature"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("payload_hash", "sha256:" + "d" * 64),
        ("decision", Verdict.DENY),
        ("expires_at_ms", NOW + 10**9),
        ("reason", "changed"),
        ("approval_id", "appr_2"),
        ("decision_id", "dec_other"),
        ("tool_version", "2.0.0"),
        ("decided_at_ms", NOW),
        ("approver_id", "bob"),
        ("state_version", "sha256:" + "0" * 64),
        ("trace_id", "0" * 32),
        ("approval_scope", "standing"),
        ("signature", b"\x00" * 64),
    ],
)
def test_field_changed_after_signing(field: str, value: object) -> None:
    tampered = decision().model_copy(update={field: value})
    who = "bob" if field == "approver_id" else "alice"
    result = judge(tampered, ticket(), approver(who), NOW)
    assert isinstance(result, Refusal) and result.code == "bad_signature"


def test_payload_mismatch() -> None:
    for overrides in (
        {"payload_hash": "sha256:" + "e" * 64},
        {"tool_name": "notify.send_email"},
        {"tool_version": "1.1.0"},
    ):
        result = judge(decision(**overrides), ticket(), approver("alice"), NOW)
        assert isinstance(result, Refusal) and result.code == "payload_mismatch", overrides


def test_a_decision_bound_to_another_trace_is_refused() -> None:
    """The seeds' approval token is refused when detached from the active trace."""
    held = ticket(trace_id="a" * 32)
    result = judge(decision(trace_id="b" * 32), held, approver("alice"), NOW)
    assert isinstance(result, Refusal) and result.code == "trace_mismatch"
    assert isinstance(judge(decision(trace_id="a" * 32), held, approver("alice"), NOW), Counted)
    # A decision naming no trace is bound to the call by its approval id alone (0.2.0 clients).
    assert isinstance(judge(decision(), held, approver("alice"), NOW), Counted)


def test_only_a_single_execution_scope_is_granted() -> None:
    result = judge(decision(approval_scope="standing"), ticket(), approver("alice"), NOW)
    assert isinstance(result, Refusal) and result.code == "scope_not_granted"
    assert isinstance(judge(decision(approval_scope="single_execution"), ticket(), approver("alice"), NOW), Counted)


def test_fields_added_since_0_1_are_signed_only_when_present() -> None:
    """A decision signed before state_version, trace_id and approval_scope existed still verifies;
    once named, each is under the signature."""
    bare = decision()
    assert b"trace_id" not in signed_bytes(bare) and verify(bare, public_bytes(KEYS["alice"]))
    named = decision(trace_id="a" * 32, approval_scope="single_execution", state_version="sha256:" + "1" * 64)
    assert all(name.encode() in signed_bytes(named) for name in ("trace_id", "approval_scope", "state_version"))
    assert not verify(named.model_copy(update={"trace_id": None}), public_bytes(KEYS["alice"]))


def test_decision_expired() -> None:
    result = judge(decision(expires_at_ms=NOW - 1), ticket(), approver("alice"), NOW)
    assert isinstance(result, Refusal) and result.code == "decision_expired"
    assert isinstance(judge(decision(expires_at_ms=NOW), ticket(), approver("alice"), NOW), Counted)


def test_approval_expired() -> None:
    result = judge(decision(), ticket(expires_at_ms=NOW - 1), approver("alice"), NOW)
    assert isinstance(result, Refusal) and result.code == "approval_expired"
    assert isinstance(judge(decision(), ticket(expires_at_ms=NOW), approver("alice"), NOW), Counted)


def test_approver_not_allowed_for_risk_class() -> None:
    result = judge(decision(), ticket(), approver("alice", risk=("HIGH_RISK_EXTERNAL",)), NOW)
    assert isinstance(result, Refusal) and result.code == "approver_not_allowed"


@pytest.mark.parametrize("status", [TicketStatus.APPROVED, TicketStatus.DENIED, TicketStatus.AUTO_DENIED, "EXPIRED"])
def test_ticket_not_pending(status: str) -> None:
    result = judge(decision(), ticket(status=status), approver("alice"), NOW)
    assert isinstance(result, Refusal) and result.code == "approval_closed"


def test_same_decision_again_is_noop() -> None:
    d = decision()
    result = judge(
        d,
        ticket(used_decisions=frozenset({d.decision_id}), decided_by=("alice",), approved_by=("alice",)),
        approver("alice"),
        NOW,
    )
    assert isinstance(result, NoOp) and result.code == "duplicate_decision"


def test_same_approver_twice_is_noop() -> None:
    t = ticket(used_decisions=frozenset({"dec_first"}), decided_by=("alice",), approved_by=("alice",))
    result = judge(decision(decision_id="dec_second"), t, approver("alice"), NOW)
    assert isinstance(result, NoOp) and result.code == "already_decided"


def test_same_approver_twice_with_bad_signature_is_refused_not_noop() -> None:
    t = ticket(decided_by=("alice",), approved_by=("alice",))
    result = judge(decision("alice", key="mallory", decision_id="dec_second"), t, approver("alice"), NOW)
    assert isinstance(result, Refusal) and result.code == "bad_signature"


def test_two_distinct_approvers_approve() -> None:
    t = ticket()
    first = judge(decision("alice"), t, approver("alice"), NOW)
    assert first == Counted(TicketStatus.PENDING, ("alice",))
    t = replace(t, approved_by=first.approved_by, decided_by=("alice",), used_decisions=frozenset({"dec_alice"}))  # type: ignore[union-attr]
    second = judge(decision("bob"), t, approver("bob"), NOW)
    assert second == Counted(TicketStatus.APPROVED, ("alice", "bob"))


def test_single_approval_ticket_is_approved_by_one() -> None:
    t = ticket(required_approvals=1, risk_class="HIGH_RISK_EXTERNAL")
    assert judge(decision(), t, approver("alice"), NOW) == Counted(TicketStatus.APPROVED, ("alice",))


def test_deny() -> None:
    assert judge(decision(verdict=Verdict.DENY), ticket(), approver("alice"), NOW) == Counted(TicketStatus.DENIED, ())
    t = ticket(approved_by=("bob",), decided_by=("bob",))
    assert judge(decision("alice", verdict=Verdict.DENY), t, approver("alice"), NOW) == Counted(
        TicketStatus.DENIED, ("bob",)
    )


def test_expiry_for_uses_contract_window() -> None:
    contract = registry().resolve("notify.send_email", "latest")
    record = stage_record(contract)
    assert expiry_for(record, contract, NOW) == NOW + contract.binding["approval"]["expiry_seconds"] * 1000


def test_expiry_for_is_cut_short_by_deadline() -> None:
    contract = registry().resolve("payment.charge_card", "latest")
    record = stage_record(contract, deadline_ms=NOW + 5_000)
    assert expiry_for(record, contract, NOW) == NOW + 5_000
    later = stage_record(contract, deadline_ms=NOW + 10**9)
    assert expiry_for(later, contract, NOW) == NOW + contract.binding["approval"]["expiry_seconds"] * 1000


def test_expiry_for_default_window() -> None:
    contract = registry().resolve("invoice.fetch", "latest")  # no approval block
    assert expiry_for(stage_record(contract), contract, NOW) == NOW + 600_000


def test_approval_id_is_deterministic() -> None:
    assert approval_id_for("acme", "call_1") == approval_id_for("acme", "call_1")
    assert approval_id_for("acme", "call_1") != approval_id_for("acme", "call_2")
    assert approval_id_for("acme", "call_1") != approval_id_for("globex", "call_1")  # call_ids are per tenant
    assert approval_id_for("acme", "call_1").startswith("appr_")
    assert len(approval_id_for("acme", "call_1")) == len("appr_") + 24


@FAST
@given(a=st.tuples(st.text(), st.text()), b=st.tuples(st.text(), st.text()))
def test_approval_id_injective_on_samples(a: tuple[str, str], b: tuple[str, str]) -> None:
    assert (approval_id_for(*a) == approval_id_for(*b)) == (a == b)


def test_confirmation_packet() -> None:
    contract = registry().resolve("payment.charge_card", "latest")
    record = stage_record(contract, required_approvals=2)
    packet = confirmation_packet(record, contract, "appr_x", "idem-key", NOW, NOW + 1000, {"status": "open"})
    assert packet.approval_id == "appr_x"
    assert packet.risk_class == "CRITICAL_MUTATION"
    assert packet.required_approvals == 2
    assert packet.approver_groups == ["finance-controllers"]
    assert "inv_acme0002" in packet.consequence and "125000" in packet.consequence
    assert "{" not in packet.consequence
    assert packet.trace_id == "0123456789abcdef0123456789abcdef"
    assert packet.idempotency_fingerprint != "idem-key" and len(packet.idempotency_fingerprint) == 16


def test_only_approvers_in_a_reached_group_count() -> None:
    held = ticket(groups=("finance-controllers",))
    director = approver("carol", groups=("finance-directors",))
    refused = judge(decision("carol"), held, director, NOW)
    assert isinstance(refused, Refusal) and refused.code == "approver_not_in_group"
    assert "finance-controllers" in refused.reason
    escalated_ticket = replace(held, groups=("finance-controllers", "finance-directors"))
    assert judge(decision("carol"), escalated_ticket, director, NOW) == Counted(TicketStatus.PENDING, ("carol",))
    ungrouped = ticket()  # a contract without groups: any approver allowed for the risk class
    assert isinstance(judge(decision("carol"), ungrouped, director, NOW), Counted)


def test_escalation_comes_at_the_fraction_of_the_time_left() -> None:
    charge = registry().resolve("payment.charge_card", "latest")  # two groups, fraction 0.5
    groups = approver_groups(stage_record(charge), charge)
    assert next_escalation_ms(charge, groups, NOW, NOW + 600_000, 0) == NOW + 300_000
    assert next_escalation_ms(charge, groups, NOW, NOW + 600_000, 1) is None  # no third group
    three = replace_binding(charge, approver_groups=["a", "b", "c"], escalate_at_fraction=0.5)
    assert next_escalation_ms(three, approver_groups(stage_record(three), three), NOW, NOW + 600_000, 1) == (
        NOW + 450_000
    )
    fetch = registry().resolve("invoice.fetch", "latest")  # no approval at all
    assert next_escalation_ms(fetch, approver_groups(stage_record(fetch), fetch), NOW, NOW + 600_000, 0) is None


def test_an_escalated_packet_opens_to_the_next_group() -> None:
    charge = registry().resolve("payment.charge_card", "latest")
    packet = confirmation_packet(stage_record(charge, required_approvals=2), charge, "appr_x", "k", NOW, NOW + 1, None)
    assert (packet.escalation_level, packet.approver_groups) == (0, ["finance-controllers"])
    up = escalated(packet, approver_groups(stage_record(charge), charge))
    assert (up.escalation_level, up.approver_groups) == (1, ["finance-controllers", "finance-directors"])
    assert up.model_copy(update={"escalation_level": 0, "approver_groups": packet.approver_groups}) == packet


def test_the_groups_the_policy_named_decide_instead_of_the_contracts() -> None:
    """A charge the policy's permits gave to finance-directors (workers/policy/case.py, `Allow`):
    its packet and ticket name them, not the contract's finance-controllers, and with one group
    named there is nothing to escalate to; two named escalate in the policy's order."""
    charge = registry().resolve("payment.charge_card", "latest")  # finance-controllers, then -directors
    record = stage_record(charge, required_approvals=2, approver_groups=["finance-directors"])
    opened = opening(record, record.traceparent, charge, {}, NOW)
    assert opened.packet.approver_groups == ["finance-directors"]
    assert ticket_row(opened)["approver_groups"] == ["finance-directors"]
    assert opened.escalate_at_ms is None  # no second group of the policy's
    assert opened.request.approver_groups == ["finance-directors"]  # kept with the held call, for the sweep
    two = stage_record(charge, required_approvals=2, approver_groups=["risk", "finance-directors"])
    opened = opening(two, two.traceparent, charge, {}, NOW)
    assert opened.packet.approver_groups == ["risk"] and opened.escalate_at_ms is not None
    up = escalated(opened.packet, approver_groups(two, charge))
    assert up.approver_groups == ["risk", "finance-directors"]
    # none named: the contract's, as before
    assert approver_groups(stage_record(charge), charge) == ["finance-controllers", "finance-directors"]


def test_an_approver_outside_the_groups_the_policy_named_is_not_counted() -> None:
    """bob is in the contract's first group (finance-controllers), carol here in the group the
    policy named (finance-directors): on a ticket opened for the policy's group only she counts."""
    charge = registry().resolve("payment.charge_card", "latest")
    record = stage_record(charge, required_approvals=2, approver_groups=["finance-directors"])
    opened = opening(record, record.traceparent, charge, {}, NOW)
    held = ticket(groups=tuple(ticket_row(opened)["approver_groups"]))
    controller = approver("bob", groups=("finance-controllers",))
    refused = judge(decision("bob"), held, controller, NOW)
    assert isinstance(refused, Refusal) and refused.code == "approver_not_in_group"
    assert "finance-directors" in refused.reason
    director = approver("carol", groups=("finance-directors",))
    assert judge(decision("carol"), held, director, NOW) == Counted(TicketStatus.PENDING, ("carol",))


def test_the_policy_stage_hands_the_groups_it_named_to_the_approval_stage() -> None:
    """What PolicyHandler._allow writes onto tool.authorized, read back as approval-wait reads it
    (its bytes decoded), opens a ticket for the policy's groups; an Allow naming none leaves the
    contract's."""
    charge = registry().resolve("payment.charge_card", "latest")
    handler = PolicyHandler(registry(), Settings())  # its pool is never opened: _allow does no I/O
    record = stage_record(charge)
    call = Inbound(record, codec().encode(record), Origin("validated", 0, 0, None, [], PayloadKind.STAGE_ITEM))
    for named, groups in (
        (("finance-directors",), ["finance-directors"]),
        ((), ["finance-controllers"]),
    ):
        out = Emit("policy")
        handler._allow(call, Allow(2, (), approver_groups=named), NOW, out)
        [[item]] = out.items.values()
        authorized = codec().decode(item, StageRecord)
        assert authorized.approver_groups == list(named)
        assert opening(authorized, authorized.traceparent, charge, {}, NOW).packet.approver_groups == groups


def replace_binding(contract: Contract, **approval: object) -> Contract:
    binding = copy.deepcopy(dict(contract.binding))
    binding["approval"] = {**binding["approval"], **approval}
    return Contract(contract.document, binding, "test")


# transition(): every row of the table in decision.py's docstring.
TRANSITIONS = [
    # (what, decision, ticket, approver, counted, then, action, outcome, status after, approved_by after)
    ("no ticket", decision(), None, "alice", False, Then.NOTHING, "decision_refused", "refused:unknown_approval",
     None, None),
    ("bad signature", decision("alice", key="mallory"), ticket(), "alice", False, Then.NOTHING, "decision_refused",
     "refused:bad_signature", TicketStatus.PENDING, ()),
    ("closed ticket", decision(), ticket(status=TicketStatus.DENIED), "alice", False, Then.NOTHING,
     "decision_refused", "refused:approval_closed", TicketStatus.DENIED, ()),
    ("same approver again", decision(decision_id="dec_2"), ticket(decided_by=("alice",), approved_by=("alice",)),
     "alice", False, Then.NOTHING, "decision_noop", "noop:already_decided", TicketStatus.PENDING, ("alice",)),
    ("first of two approvals", decision(), ticket(), "alice", True, Then.NOTHING, "decision_counted",
     "counted:PENDING", TicketStatus.PENDING, ("alice",)),
    ("second of two approvals", decision("bob"), ticket(decided_by=("alice",), approved_by=("alice",)), "bob", True,
     Then.RELEASE, "decision_counted", "counted:APPROVED", TicketStatus.APPROVED, ("alice", "bob")),
    ("one approval is enough", decision(), ticket(required_approvals=1), "alice", True, Then.RELEASE,
     "decision_counted", "counted:APPROVED", TicketStatus.APPROVED, ("alice",)),
    ("a denial", decision("bob", verdict=Verdict.DENY), ticket(decided_by=("alice",), approved_by=("alice",)), "bob",
     True, Then.DENY, "decision_counted", "counted:DENIED", TicketStatus.DENIED, ("alice",)),
]  # fmt: skip


@pytest.mark.parametrize(
    ("what", "signed", "held", "who", "counted", "then", "action", "outcome", "status", "approved_by"),
    TRANSITIONS,
    ids=[row[0] for row in TRANSITIONS],
)
def test_transition(
    what: str,
    signed: ApprovalDecision,
    held: Ticket | None,
    who: str,
    counted: bool,
    then: Then,
    action: str,
    outcome: str,
    status: TicketStatus | None,
    approved_by: tuple[str, ...] | None,
) -> None:
    step = transition(signed, held, approver(who), NOW)
    assert (step.counted, step.then, step.action, step.outcome) == (counted, then, action, outcome)
    assert step.detail["approval_id"] == signed.approval_id and step.detail["decision_id"] == signed.decision_id
    assert step.detail["verdict"] == str(signed.decision)
    if held is None:
        assert step.ticket is None
        return
    assert step.ticket is not None
    assert (step.ticket.status, step.ticket.approved_by) == (status, approved_by)
    if counted:
        assert step.detail["status_after"] == str(status) and type(step.detail["status_after"]) is str
        assert step.ticket.decided_by == (*held.decided_by, signed.approver_id)
        assert step.ticket.used_decisions == held.used_decisions | {signed.decision_id}
    else:
        assert step.ticket == held
        assert {"code", "reason"} <= step.detail.keys() and outcome.endswith(step.detail["code"])
