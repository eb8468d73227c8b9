"""Execution's own check that a call may run, every row of clearance.py's table."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from tests.unit.factories import changed, registry, stage_record
from toolgate.schemas.hashing import payload_hash
from toolgate.schemas.models import StageRecord, TaxonomyClass
from toolgate.states import KeyStatus, TicketStatus
from toolgate.workers.approval.decision import approval_id_for
from toolgate.workers.execution.clearance import (
    Blocked,
    Cleared,
    Ticket,
    approvals_needed,
    clear,
    consumed_elsewhere,
    hash_intact,
    spent,
    stale,
    ticket_id,
)
from toolgate.workers.execution.idempotency import Execute, Expired, Replay

CHARGE = registry().get("payment.charge_card", "1.0.0")
DRAFT = registry().get("invoice.create_draft", "1.0.0")
KEY = "tg_operation"


def charge(**overrides: Any) -> StageRecord:
    record = stage_record(CHARGE)
    return changed(record, payload_hash=payload_hash(record.call.arguments), **overrides)


def ticket(record: StageRecord, **overrides: Any) -> Ticket:
    base = Ticket(
        approval_id=approval_id_for(record.call.tenant_id, record.call.call_id),
        status=TicketStatus.APPROVED,
        call_id=record.call.call_id,
        tenant_id=record.call.tenant_id,
        tool_name=record.call.tool_name,
        tool_version=record.call.tool_version,
        payload_hash=record.call.payload_hash,
        required_approvals=2,
        state_version="sha256:before",
        consumed_by=None,
        approvers=2,
    )
    return replace(base, **overrides)


def test_arguments_must_hash_to_the_validated_payload_hash() -> None:
    assert hash_intact(charge()) is None
    tampered = charge(arguments={**charge().call.arguments, "amount_cents": 1})
    blocked = hash_intact(tampered)
    assert blocked is not None and blocked.taxonomy is TaxonomyClass.SIGNATURE_MISMATCH


def test_a_record_cannot_claim_fewer_approvals_than_its_class_and_contract_demand() -> None:
    assert approvals_needed(charge(required_approvals=0), CHARGE) == 2
    assert approvals_needed(stage_record(DRAFT, required_approvals=0), DRAFT) == 0
    assert approvals_needed(stage_record(DRAFT, required_approvals=1), DRAFT) == 1  # a policy rule asked for one


def test_the_ticket_is_found_by_the_calls_own_id() -> None:
    assert ticket_id(charge(approval_id="appr_someone_elses")) == approval_id_for("acme", "call_1")


def test_a_call_that_needs_no_approval_is_cleared_without_a_ticket() -> None:
    assert clear(stage_record(DRAFT), DRAFT, KEY, None) == Cleared(None)


BLOCKED = [
    ("no_approval", None),
    ("approval_not_granted", {"status": TicketStatus.PENDING}),
    ("approval_not_granted", {"status": TicketStatus.DENIED}),
    ("approval_not_granted", {"status": "AUTO_DENIED"}),
    ("approval_mismatch", {"call_id": "call_2"}),
    ("approval_mismatch", {"tenant_id": "globex"}),
    ("approval_mismatch", {"tool_name": "notify.send_email"}),
    ("approval_mismatch", {"tool_version": "0.9.0"}),
    ("approval_mismatch", {"payload_hash": "sha256:" + "1" * 64}),
    ("approval_consumed", {"consumed_by": "tg_another_operation"}),
    ("too_few_approvers", {"approvers": 1}),
    ("too_few_approvers", {"approvers": 2, "required_approvals": 3}),
]


@pytest.mark.parametrize(("code", "change"), BLOCKED, ids=[f"{c}-{i}" for i, (c, _) in enumerate(BLOCKED)])
def test_what_blocks_a_held_call(code: str, change: dict[str, Any] | None) -> None:
    record = charge()
    found = None if change is None else ticket(record, **change)
    verdict = clear(record, CHARGE, KEY, found)
    assert isinstance(verdict, Blocked) and verdict.code == code
    assert verdict.taxonomy is TaxonomyClass.CONFIRMATION_MISSING


def test_an_approved_ticket_clears_its_operation_again_and_again() -> None:
    record = charge()
    assert clear(record, CHARGE, KEY, ticket(record)) == Cleared(ticket(record))
    assert clear(record, CHARGE, KEY, ticket(record, consumed_by=KEY)) == Cleared(ticket(record, consumed_by=KEY))


def test_a_target_that_moved_since_approval_is_stale_state() -> None:
    found = ticket(charge())
    assert stale(found, "sha256:before") is None
    assert stale(replace(found, state_version=None), "sha256:anything") is None
    assert stale(None, "sha256:after") is None
    moved = stale(found, "sha256:after")
    assert moved is not None and moved.taxonomy is TaxonomyClass.STALE_STATE and moved.code == "state_changed"
    gone = stale(found, "absent")
    assert gone is not None and gone.taxonomy is TaxonomyClass.STALE_STATE


def test_a_ticket_consumed_elsewhere_meanwhile_blocks_the_call() -> None:
    blocked = consumed_elsewhere(ticket(charge()))
    assert (blocked.taxonomy, blocked.code) == (TaxonomyClass.CONFIRMATION_MISSING, "approval_consumed")
    assert approval_id_for("acme", "call_1") in blocked.reason
    assert "approval ? released" in consumed_elsewhere(None).reason


def test_a_spent_ticket_releases_no_execution_of_its_operation_again() -> None:
    record = charge()
    spent_ticket = ticket(record, consumed_by=KEY, spent=True)
    # The operation's own retry clears (the plan decides), and may replay what it stored ...
    assert clear(record, CHARGE, KEY, spent_ticket) == Cleared(spent_ticket)
    assert spent(spent_ticket, Replay({"ok": True}, KeyStatus.COMPLETED)) is None
    assert spent(spent_ticket, Expired()) is None
    # ... but never executes again, whatever became of its key (expired, pruned: planned Execute).
    blocked = spent(spent_ticket, Execute(1))
    assert blocked is not None and blocked.taxonomy is TaxonomyClass.CONFIRMATION_MISSING
    assert blocked.code == "approval_spent"
    # A ticket not spent, or no ticket, blocks nothing here.
    assert spent(ticket(record, consumed_by=KEY), Execute(2)) is None
    assert spent(None, Execute(1)) is None
