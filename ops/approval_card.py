"""The confirmation card of a held call, as an approver reads it (`toolgate approvals show`).

Everything on a card but its labels comes from the agent or its call (arguments, the
consequence filled from them, ids, states) and is shown as inert text (`shown`): the card is
built of Text objects, never parsed as markup. States (the target's before-state and the
expected after-state) are indented JSON, a line of the card per line of JSON, so an approver
reads what the tool will see, not a Python repr of it."""

from __future__ import annotations

import datetime as dt
import json
import unicodedata
from typing import Any

from rich.panel import Panel
from rich.text import Text

from toolgate.ops.registry import utc_text
from toolgate.schemas.models import ApprovalRequest

UNSHOWN = frozenset({"Cc", "Cf", "Zl", "Zp", "Co", "Cs"})
LABEL = 18
Part = str | tuple[str, str]


def shown(value: Any) -> str:
    """Agent text as it may appear on a card: one line, every control, format (bidi overrides,
    zero-width) and separator character written as its escape, so no value can style, hide,
    reorder or add lines. The card is built of Text objects, never parsed as markup."""
    text = value if isinstance(value, str) else str(value)
    return "".join(f"\\u{ord(c):04x}" if unicodedata.category(c) in UNSHOWN else c for c in text)


def _json(value: Any) -> str:
    return shown(json.dumps(value, ensure_ascii=False, sort_keys=True))


def json_lines(value: Any) -> list[str]:
    """`value` as indented JSON, its keys sorted, each line inert text (JSON escapes the
    controls inside a string; `shown` the format and separator characters JSON lets through)."""
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, indent=2)
    return [shown(line) for line in text.split("\n")]  # not splitlines(): U+2028 in a string is no line


def _line(label: str, *parts: str) -> list[Part]:
    return [(f"{label:<{LABEL}}", "bold"), *(shown(p) for p in parts), "\n"]


def _state(label: str, value: dict[str, Any] | None, missing: str) -> list[Part]:
    """A state as its JSON, under its label and indented past it; `missing` when there is none."""
    if value is None:
        return _line(label, missing)
    first, *rest = json_lines(value)
    parts: list[Part] = [(f"{label:<{LABEL}}", "bold"), first, "\n"]
    for more in rest:
        parts += [" " * LABEL, more, "\n"]
    return parts


def _votes(decisions: list[dict[str, Any]]) -> list[Part]:
    votes: list[Part] = [("Decisions", "bold")]
    for d in decisions:
        reason = f" ({d['reason']})" if d["reason"] else ""
        votes += ["\n    ", shown(f"{d['approver']}: {d['verdict']} at {d['at']}{reason}")]
    if not decisions:
        votes.append("\n    none yet")
    return votes


def _edit(edit: dict[str, Any] | None) -> list[Part]:
    """An approver's edit: of this ticket (by whom, where the edited call waits), or the one this
    ticket's call came from (from which ticket, by whom, each argument changed)."""
    if edit is None:
        return []
    if "edited_from" not in edit:
        waits = f"; the edited call waits as {edit['edited_into']}" if edit.get("edited_into") else ""
        return _line("Edited", f"by {edit['edited_by']}{waits}")
    lines: list[Part] = _line("Edited from", f"{edit['edited_from']} by {edit['edited_by']}")
    for change in edit["diff"]:
        lines += [f"    {shown(change['field'])}: ", _json(change["before"]), " -> ", _json(change["after"]), "\n"]
    return lines


def card(packet: ApprovalRequest, state: dict[str, Any]) -> Panel:
    """The card of `packet` where it stands (`state`: status, decided_at, decisions)."""
    args: list[Part] = [("Arguments", "bold"), "\n"]
    for k, v in packet.arguments.items():
        args += [f"    {shown(k)}: ", _json(v), "\n"]
    groups = ", ".join(packet.approver_groups) or "any approver allowed for the risk class"
    if packet.escalation_level:
        groups += f"  (escalated {packet.escalation_level}x)"
    who = f"{packet.requested_by.user_id} via {packet.requested_by.agent_id} "
    needs = f"  (needs {packet.required_approvals} approval(s)"
    needs += ", from different approvers)" if packet.required_approvals > 1 else ")"
    expires = utc_text(dt.datetime.fromtimestamp(packet.expires_at_ms / 1000, dt.UTC))
    text = Text.assemble(
        *_line("Action", packet.action),
        *_line("Tool", f"{packet.tool_name} {packet.tool_version}"),
        *_line("Consequence", packet.consequence),
        *args,
        *_state("Before state", packet.before_state, "not available"),
        *_state("Expected after", packet.expected_after_state, "not declared"),
        *_line("Risk class", packet.risk_class, needs),
        *_line("Who may decide", groups),
        *_line(
            "Idempotency",
            f"fingerprint {packet.idempotency_fingerprint}, payload {packet.payload_hash[:23]}...",
        ),
        *_line("Compensation", packet.compensation),
        *_line("If rejected", packet.rejection_path),
        *_line("Requested by", who, f"(tenant {packet.tenant_id}, run {packet.run_id})"),
        *_line("Expires", expires),
        *_line("Trace", packet.trace_id),
        *_line("Status", state["status"]),
        *_edit(state.get("edit")),
        *_votes(state["decisions"]),
    )
    return Panel(text, title=Text(f"CONFIRMATION REQUEST {shown(packet.approval_id)}"), expand=False)
