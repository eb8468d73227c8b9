"""What the console's templates show, built from a ticket's packet, its votes and where it
stands: the same fields as `toolgate approvals show` (ops/approval_card.py), agent text passed
through `shown` (no control, bidi or zero-width character acts) and states as indented JSON.
The templates escape every value (Jinja2's autoescape): agent text is text, never markup."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from typing import Any

from toolgate.contracts.edits import Change
from toolgate.ops.approval_card import json_lines, shown
from toolgate.ops.approvals import edit_shown
from toolgate.ops.registry import utc_text
from toolgate.schemas.models import ApprovalRequest
from toolgate.schemas.wire import canonical_json
from toolgate.store.console_inbox import Card, Uncounted, Vote, Waiting
from toolgate.store.edits import EditState


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


def _json(value: Any) -> str:
    return "absent" if value is None else shown(json.dumps(value, ensure_ascii=False, sort_keys=True))


def diff_rows(changes: list[Change]) -> list[dict[str, str]]:
    """An edit's difference as the card shows it: each changed argument, its value before and
    after, as inert text."""
    return [{"field": shown(c.field), "before": _json(c.before), "after": _json(c.after)} for c in changes]


def edit_view(state: EditState | None, arguments: dict[str, Any]) -> dict[str, Any] | None:
    """A ticket's part in an edit, as `approvals show` has it (ops/approvals.py `edit_shown`):
    closed EDITED, by whom and the ticket the edited call waits under (None until approval-wait
    opened it); or, on the edited call's ticket, the ticket it was edited from, by whom, and the
    difference."""
    edit = edit_shown(state, arguments)
    if edit is None:
        return None
    if "edited_from" not in edit:
        return {"edited_by": shown(edit["edited_by"]), "edited_into": edit["edited_into"]}
    changes = [Change(c["field"], c["before"], c["after"]) for c in edit["diff"]]
    return {"edited_from": edit["edited_from"], "edited_by": shown(edit["edited_by"]), "diff": diff_rows(changes)}


def card_view(
    card: Card, votes: list[Vote], edit: EditState | None = None, uncounted: Sequence[Uncounted] = ()
) -> dict[str, Any]:
    """A card's fields, in the order `approvals show` prints them, its votes, its history (with the
    decisions that did not count), its
    part in an edit, and the held arguments as the edit field starts from (indented JSON) and as
    the browser checks an edit against (canonical JSON)."""
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
        "arguments_json": shown(canonical_json(packet.arguments)),  # JSON still: escapes only inside strings
        "arguments_text": "\n".join(json_lines(packet.arguments)),
        "edit": edit_view(edit, packet.arguments),
        "before_state": _state(packet.before_state, "not available"),
        "expected_after": _state(packet.expected_after_state, "not declared"),
        "votes": [_vote(v) for v in votes],
        "tally": f"{approved} of {packet.required_approvals} approval(s)",
        "expires_at": utc_text(card.expires_at),
        "expires_at_ms": _ms(card.expires_at),
        "history": _history(card, votes, uncounted),
    }


def _vote(vote: Vote) -> dict[str, str]:
    reason = f" ({vote.reason})" if vote.reason else ""
    return {"text": shown(f"{vote.approver_id}: {vote.verdict} at {utc_text(vote.decided_at)}{reason}")}


def _history(card: Card, votes: list[Vote], uncounted: Sequence[Uncounted]) -> list[tuple[str, str]]:
    """The ticket's life, oldest first: opened, each decision counted on it and each that was
    not, and how it closed."""
    events = [(card.created_at, "opened: the call is held for approval")]
    events += [(v.decided_at, shown(f"{v.approver_id} decided {v.verdict}")) for v in votes]
    events += [(u.at, _not_counted(u)) for u in uncounted]
    if card.status != "PENDING" and card.decided_at is not None:
        events.append((card.decided_at, f"closed: {card.status}"))
    return [(utc_text(at), what) for at, what in sorted(events, key=lambda event: event[0])]


def _not_counted(decision: Uncounted) -> str:
    """A decision that did not count, as the history says it: an unproven one names its signer as
    claimed only, and its code (its reason would quote what it claims)."""
    if not decision.proven:
        return shown(f"a decision signed as {decision.signer} ({decision.verdict}) proved nobody: {decision.code}")
    why = f"{decision.code}: {decision.reason}" if decision.reason else str(decision.code)
    said = "again, not counted" if decision.repeat else "not counted"
    return shown(f"{decision.signer} decided {decision.verdict}, {said} ({why})")
