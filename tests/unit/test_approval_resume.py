"""What approval-wait says again about a ticket it already holds (workers/approval/resume.py):
the ticket's status in Postgres decides, never the message that brought the call again."""

from __future__ import annotations

import pytest

from toolgate.schemas.codec import codec
from toolgate.schemas.models import ApprovalRequest, ExecutionResult, StageRecord
from toolgate.states import TicketStatus
from toolgate.workers.approval import resume

from .factories import registry, sample_models, stage_record

SEND_EMAIL = registry().get("notify.send_email", "1.0.0")


def _held(status: TicketStatus, approved_by: tuple[str, ...] = (), denied_by: str | None = None) -> resume.Held:
    record = stage_record(SEND_EMAIL, required_approvals=1, approval_id="apr_1", home_partition=3)
    packet: ApprovalRequest = sample_models()[ApprovalRequest].model_copy(update={"approval_id": "apr_1"})
    return resume.Held("apr_1", status, record, packet, approved_by, denied_by, "not today" if denied_by else None)


def _result(row: object) -> ExecutionResult:
    return codec().decode(row.payload, ExecutionResult)  # type: ignore[attr-defined]


def test_a_pending_ticket_announces_its_packet_again_and_tells_the_agent_it_waits() -> None:
    packet, interim = resume.again(_held(TicketStatus.PENDING), "tp", now=1)
    assert (packet.topic, packet.kind, packet.tenant, packet.key) == ("approvals_requested", "record", "acme", b"apr_1")
    assert (interim.topic, interim.partition) == ("results", 3)
    assert _result(interim).outcome.code == 202


def test_an_approved_ticket_releases_the_call_with_its_approvers_of_record() -> None:
    [row] = resume.again(_held(TicketStatus.APPROVED, approved_by=("alice", "bob")), "tp", now=1)
    assert (row.topic, row.partition) == ("executable", 3)
    released = codec().decode(row.payload, StageRecord)
    assert released.approvers == ["alice", "bob"] and released.call.call_id == "call_1"


@pytest.mark.parametrize(
    ("status", "code", "says"),
    [
        (TicketStatus.DENIED, "approval_denied", "carol denied the approval: not today"),
        (TicketStatus.AUTO_DENIED, "approval_expired", "expired"),
    ],
)
def test_a_closed_ticket_ends_the_call_again_as_it_ended(status: TicketStatus, code: str, says: str) -> None:
    [row] = resume.again(_held(status, denied_by="carol" if status == TicketStatus.DENIED else None), "tp", now=1)
    result = _result(row)
    assert (row.topic, result.outcome.taxonomy_class, result.outcome.fail_closed) == (
        "results",
        "CONFIRMATION_MISSING",
        True,
    )
    [error] = result.errors
    assert error.code == code and says in error.message


def test_an_edited_ticket_says_nothing_again() -> None:
    """The held call came again after an approver edited it (its agent re-published it): the
    edited call answers it, so nothing is said for the held one (before EDITED existed, the
    fall-through said the approval had expired: a second, contradictory final)."""
    assert resume.again(_held(TicketStatus.EDITED), "tp", now=1) == []
