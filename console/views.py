"""What the console's templates show, built from a ticket's packet, its votes and where it
stands: the same fields as `toolgate approvals show` (ops/approval_card.py), agent text passed
through `shown` (no control, bidi or zero-width character acts) and states as indented JSON.
The templates escape every value (Jinja2's autoescape): agent text is text, never markup."""

from __future__ import annotations

import datetime as dt
from typing import Any

from toolgate.ops.approval_card import json_lines, shown
from toolgate.ops.registry import utc_text
from toolgate.schemas.models import ApprovalRequest
from toolgate.store.console_inbox import Card, Vote, Waiting


def _ms(at: dt.datetime) -> int:
    return int(at.timestamp() * 1000)


def _state(value: dict[str, Any] | None, missing: str) -> str:
    return missing if value is None else "\n".join(json_lines(value))


def inbox_row(row: Waiting) -> dict[str, Any]:
    return {
        "approval_id": row.approval_id,
        "tenant": shown(row.tenant_id),
        "tool": shown(f"{row.tool_name} {row.tool_version}"),
        "action": shown(row.action or ""),
        "risk_class": shown(row.risk_class),
        "votes": f"{row.approved} of {row.required_approvals}" + (", yours counted" if row.voted else ""),
        "expires_at": utc_text(row.expires_at),
        "expires_at_ms": _ms(row.expires_at),
    }


def _who(packet: ApprovalRequest) -> str:
    who = packet.requested_by
    return shown(f"{who.user_id} via {who.agent_id} (tenant {packet.tenant_id}, run {packet.run_id})")


def _needs(packet: ApprovalRequest) -> str:
    needs = f"{packet.required_approvals} approval(s)"
    return needs + (", from different approvers" if packet.required_approvals > 1 else "")


def card_view(card: Card, votes: list[Vote]) -> dict[str, Any]:
    """A card's fields, in the order `approvals show` prints them, its votes and its history."""
    packet = ApprovalRequest.model_validate(card.packet)
    groups = ", ".join(packet.approver_groups) or "any approver allowed for the risk class"
    fields = [
        ("Action", shown(packet.action)),
        ("Tool", shown(f"{packet.tool_name} {packet.tool_version}")),
        ("Consequence", shown(packet.consequence)),
        ("Risk class", shown(f"{packet.risk_class} (needs {_needs(packet)})")),
        (
            "Who may decide",
            shown(groups + (f" (escalated {packet.escalation_level}x)" if packet.escalation_level else "")),
        ),
        ("Idempotency", shown(f"fingerprint {packet.idempotency_fingerprint}, payload {packet.payload_hash}")),
        ("Compensation", shown(packet.compensation)),
        ("If rejected", shown(packet.rejection_path)),
        ("Requested by", _who(packet)),
        ("Trace", shown(packet.trace_id)),
    ]
    approved = sum(1 for v in votes if v.verdict == "APPROVE")
    return {
        "approval_id": packet.approval_id,
        "payload_hash": packet.payload_hash,
        "status": card.status,
        "open": card.status == "PENDING",
        "fields": fields,
        "arguments": [(shown(k), "\n".join(json_lines(v))) for k, v in packet.arguments.items()],
        "before_state": _state(packet.before_state, "not available"),
        "expected_after": _state(packet.expected_after_state, "not declared"),
        "votes": [_vote(v) for v in votes],
        "tally": f"{approved} of {packet.required_approvals} approval(s)",
        "expires_at": utc_text(card.expires_at),
        "expires_at_ms": _ms(card.expires_at),
        "history": _history(card, votes),
    }


def _vote(vote: Vote) -> dict[str, str]:
    reason = f" ({vote.reason})" if vote.reason else ""
    return {"text": shown(f"{vote.approver_id}: {vote.verdict} at {utc_text(vote.decided_at)}{reason}")}


def _history(card: Card, votes: list[Vote]) -> list[tuple[str, str]]:
    """The ticket's life, oldest first: opened, each decision counted on it, and how it closed."""
    events = [(utc_text(card.created_at), "opened: the call is held for approval")]
    events += [(utc_text(v.decided_at), shown(f"{v.approver_id} decided {v.verdict}")) for v in votes]
    if card.status != "PENDING" and card.decided_at is not None:
        events.append((utc_text(card.decided_at), f"closed: {card.status}"))
    return events
