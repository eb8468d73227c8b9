"""Operator commands for held calls: list, show (the confirmation card), decide.

Everything on a card but its labels comes from the agent or its call (arguments, the
consequence filled from them, ids, states) and is shown as inert text (`shown`). An approver is
offered only what it may decide: `list_approvals(approver=...)` lists the tickets of the tenants
it serves, and `decide` signs nothing for another tenant (approval-wait would refuse it anyway,
`approver_not_for_tenant`). Approvers themselves are managed in ops/approvers.py."""

from __future__ import annotations

import datetime as dt
import json
import time
import unicodedata
from typing import Any

import psycopg
from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from toolgate.client import ApprovalClient
from toolgate.kafka_security import APPROVALS, client_config
from toolgate.ops.registry import utc_text
from toolgate.schemas.models import ApprovalDecision, ApprovalRequest
from toolgate.settings import Settings
from toolgate.store import approvals, approvers, audit
from toolgate.topics.catalog import Topics
from toolgate.trust.signing import Keyring
from toolgate.workers.runtime.wakeup import announce


def _when(ts: dt.datetime | None) -> str:
    return utc_text(ts) if ts else "-"


def list_approvals(
    settings: Settings, status: str | None, limit: int = 50, approver: str | None = None
) -> list[dict[str, Any]]:
    """The newest tickets (of `status`; of the tenants `approver` decides for, when given)."""
    with psycopg.connect(settings.database_url) as conn:
        rows = approvals.listed(conn, status, limit, approver)
    return [
        {
            "approval_id": r.approval_id,
            "status": r.status,
            "tool": r.tool_name,
            "version": r.tool_version,
            "risk_class": r.risk_class,
            "tenant": r.tenant_id,
            "required": r.required_approvals,
            "approved": r.approved,
            "created_at": _when(r.created_at),
            "expires_at": _when(r.expires_at),
            "call_id": r.call_id,
        }
        for r in rows
    ]


def print_list(rows: list[dict[str, Any]], console: Console) -> None:
    table = Table(title="approvals")
    for col in ("approval_id", "status", "tool", "risk_class", "tenant", "approved", "expires_at"):
        table.add_column(col)
    for r in rows:
        cells = (
            r["approval_id"],
            r["status"],
            f"{r['tool']} {r['version']}",
            r["risk_class"],
            r["tenant"],
            f"{r['approved']}/{r['required']}",
            r["expires_at"],
        )
        table.add_row(*(Text(shown(c)) for c in cells))
    console.print(table)


def load(settings: Settings, approval_id: str) -> tuple[ApprovalRequest, dict[str, Any]]:
    with psycopg.connect(settings.database_url) as conn:
        found = approvals.card(conn, approval_id)
        if found is None:
            raise SystemExit(f"no approval {approval_id}")
        decisions = approvals.decisions(conn, approval_id)
    state = {
        "status": found.status,
        "decided_at": _when(found.decided_at),
        "decisions": [
            {"approver": d.approver_id, "verdict": d.verdict, "reason": d.reason, "at": _when(d.decided_at)}
            for d in decisions
        ],
    }
    return ApprovalRequest.model_validate(found.packet), state


UNSHOWN = frozenset({"Cc", "Cf", "Zl", "Zp", "Co", "Cs"})


def shown(value: Any) -> str:
    """Agent text as it may appear on a card: one line, every control, format (bidi overrides,
    zero-width) and separator character written as its escape, so no value can style, hide,
    reorder or add lines. The card is built of Text objects, never parsed as markup."""
    text = value if isinstance(value, str) else str(value)
    return "".join(f"\\u{ord(c):04x}" if unicodedata.category(c) in UNSHOWN else c for c in text)


def _json(value: Any) -> str:
    return shown(json.dumps(value, ensure_ascii=False, sort_keys=True))


def card(packet: ApprovalRequest, state: dict[str, Any]) -> Panel:
    def ms(v: int) -> str:
        return _when(dt.datetime.fromtimestamp(v / 1000, dt.UTC))

    def line(label: str, *parts: str) -> list[str | tuple[str, str]]:
        return [(f"{label:<18}", "bold"), *(shown(p) for p in parts), "\n"]

    args: list[str | tuple[str, str]] = [("Arguments", "bold"), "\n"]
    for k, v in packet.arguments.items():
        args += [f"    {shown(k)}: ", _json(v), "\n"]
    groups = ", ".join(packet.approver_groups) or "any approver allowed for the risk class"
    if packet.escalation_level:
        groups += f"  (escalated {packet.escalation_level}x)"
    votes: list[str | tuple[str, str]] = [("Decisions", "bold")]
    for d in state["decisions"]:
        reason = f" ({d['reason']})" if d["reason"] else ""
        votes += ["\n    ", shown(f"{d['approver']}: {d['verdict']} at {d['at']}{reason}")]
    if not state["decisions"]:
        votes.append("\n    none yet")
    who = f"{packet.requested_by.user_id} via {packet.requested_by.agent_id} "
    needs = f"  (needs {packet.required_approvals} approval(s)"
    needs += ", from different approvers)" if packet.required_approvals > 1 else ")"
    text = Text.assemble(
        *line("Action", packet.action),
        *line("Tool", f"{packet.tool_name} {packet.tool_version}"),
        *line("Consequence", packet.consequence),
        *args,
        *line("Before state", str(packet.before_state or "not available")),
        *line("Expected after", str(packet.expected_after_state or "not declared")),
        *line("Risk class", packet.risk_class, needs),
        *line("Who may decide", groups),
        *line(
            "Idempotency",
            f"fingerprint {packet.idempotency_fingerprint}, payload {packet.payload_hash[:23]}...",
        ),
        *line("Compensation", str(packet.compensation)),
        *line("If rejected", packet.rejection_path),
        *line("Requested by", who, f"(tenant {packet.tenant_id}, run {packet.run_id})"),
        *line("Expires", ms(packet.expires_at_ms)),
        *line("Trace", packet.trace_id),
        *line("Status", state["status"]),
        *votes,
    )
    return Panel(text, title=Text(f"CONFIRMATION REQUEST {shown(packet.approval_id)}"), expand=False)


class NotServed(Exception):
    """The approver does not decide for the ticket's tenant (or is not an active approver)."""


def decide(settings: Settings, approval_id: str, approver: str, approve: bool, reason: str | None) -> ApprovalDecision:
    """Sign and publish a decision as `approver`; NotServed (nothing signed) when it does not
    decide for the ticket's tenant."""
    packet, _ = load(settings, approval_id)
    with psycopg.connect(settings.database_url) as conn:
        serves = approvers.serves(conn, approver, packet.tenant_id)
    if not serves:
        raise NotServed(f"{approver} is not an active approver of tenant {packet.tenant_id}")
    key = Keyring(settings.home / "approvers").load(approver)
    client = ApprovalClient(
        settings.kafka_bootstrap,
        settings.topic_prefix,
        client_id=f"toolgate-approver-{approver}",
        kafka_config=client_config(settings, APPROVALS),
    )
    decision = client.decide(packet, approver_id=approver, key=key, approve=approve, reason=reason)
    announce(settings.database_url, Topics(settings.topic_prefix).approvals_decisions)  # approval-wait may nap
    return decision


def judgment(settings: Settings, decision_id: str, timeout: float = 15.0) -> dict[str, Any] | None:
    """How the approval-wait stage judged a decision (counted, no-op or refused, and why), read
    from the audit log; None when it has not been judged within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(settings.database_url, autocommit=True) as conn:
        while True:
            found = audit.judgment(conn, decision_id)
            if found is not None:
                action, detail = found
                return {"outcome": action.removeprefix("decision_"), **detail}
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.2)
