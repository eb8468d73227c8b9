"""Operator commands for approvals and approvers: list, show (the confirmation card), decide."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import psycopg
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from toolgate.kafka_security import client_config
from toolgate.schemas.models import ApprovalDecision, ApprovalRequest
from toolgate.settings import Settings
from toolgate.signing import Keyring, new_key, public_bytes
from toolgate.topics.client import ApprovalClient

LIST = """
SELECT a.approval_id, a.status, a.tool_name, a.tool_version, a.risk_class, a.tenant_id, a.required_approvals,
       count(d.*) FILTER (WHERE d.verdict = 'APPROVE'), a.created_at, a.expires_at, a.call_id
FROM toolgate.approvals a LEFT JOIN toolgate.approval_decisions d USING (approval_id)
WHERE (%(status)s::text IS NULL OR a.status = %(status)s)
GROUP BY a.approval_id ORDER BY a.created_at DESC LIMIT %(limit)s
"""


def _when(ts: dt.datetime | None) -> str:
    return ts.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if ts else "-"


def list_approvals(settings: Settings, status: str | None, limit: int = 50) -> list[dict[str, Any]]:
    with psycopg.connect(settings.database_url) as conn:
        rows = conn.execute(LIST, {"status": status, "limit": limit}).fetchall()
    keys = [
        "approval_id",
        "status",
        "tool",
        "version",
        "risk_class",
        "tenant",
        "required",
        "approved",
        "created_at",
        "expires_at",
        "call_id",
    ]
    return [{k: (_when(v) if isinstance(v, dt.datetime) else v) for k, v in zip(keys, r, strict=True)} for r in rows]


def print_list(rows: list[dict[str, Any]], console: Console) -> None:
    table = Table(title="approvals")
    for col in ("approval_id", "status", "tool", "risk_class", "tenant", "approved", "expires_at"):
        table.add_column(col)
    for r in rows:
        table.add_row(
            r["approval_id"],
            r["status"],
            f"{r['tool']} {r['version']}",
            r["risk_class"],
            r["tenant"],
            f"{r['approved']}/{r['required']}",
            r["expires_at"],
        )
    console.print(table)


def load(settings: Settings, approval_id: str) -> tuple[ApprovalRequest, dict[str, Any]]:
    with psycopg.connect(settings.database_url) as conn:
        row = conn.execute(
            "SELECT packet, status, decided_at FROM toolgate.approvals WHERE approval_id = %s", (approval_id,)
        ).fetchone()
        if row is None:
            raise SystemExit(f"no approval {approval_id}")
        decisions = conn.execute(
            "SELECT approver_id, verdict, reason, decided_at FROM toolgate.approval_decisions WHERE approval_id = %s "
            "ORDER BY recorded_at",
            (approval_id,),
        ).fetchall()
    state = {
        "status": row[1],
        "decided_at": _when(row[2]),
        "decisions": [{"approver": d[0], "verdict": d[1], "reason": d[2], "at": _when(d[3])} for d in decisions],
    }
    return ApprovalRequest.model_validate(row[0]), state


def card(packet: ApprovalRequest, state: dict[str, Any]) -> Panel:
    def ms(v: int) -> str:
        return _when(dt.datetime.fromtimestamp(v / 1000, dt.UTC))

    args = "\n".join(f"    {k}: {v}" for k, v in packet.arguments.items())
    groups = ", ".join(packet.approver_groups) or "any approver allowed for the risk class"
    if packet.escalation_level:
        groups += f"  (escalated {packet.escalation_level}x)"
    votes = (
        "\n".join(
            f"    {d['approver']}: {d['verdict']} at {d['at']}" + (f" ({d['reason']})" if d["reason"] else "")
            for d in state["decisions"]
        )
        or "    none yet"
    )
    text = (
        f"[bold]Action[/bold]            {packet.action}\n"
        f"[bold]Tool[/bold]              {packet.tool_name} {packet.tool_version}\n"
        f"[bold]Consequence[/bold]       {packet.consequence}\n"
        f"[bold]Arguments[/bold]\n{args}\n"
        f"[bold]Before state[/bold]      {packet.before_state or 'not available'}\n"
        f"[bold]Expected after[/bold]    {packet.expected_after_state or 'not declared'}\n"
        f"[bold]Risk class[/bold]        {packet.risk_class}  (needs {packet.required_approvals} approval(s)"
        f"{', from different approvers' if packet.required_approvals > 1 else ''})\n"
        f"[bold]Who may decide[/bold]    {groups}\n"
        f"[bold]Idempotency[/bold]       fingerprint {packet.idempotency_fingerprint}, "
        f"payload {packet.payload_hash[:23]}...\n"
        f"[bold]Compensation[/bold]      {packet.compensation}\n"
        f"[bold]If rejected[/bold]       {packet.rejection_path}\n"
        f"[bold]Requested by[/bold]      {packet.requested_by.user_id} via {packet.requested_by.agent_id} "
        f"(tenant {packet.tenant_id}, run {packet.run_id})\n"
        f"[bold]Expires[/bold]           {ms(packet.expires_at_ms)}\n"
        f"[bold]Trace[/bold]             {packet.trace_id}\n"
        f"[bold]Status[/bold]            {state['status']}\n"
        f"[bold]Decisions[/bold]\n{votes}"
    )
    return Panel(text, title=f"CONFIRMATION REQUEST {packet.approval_id}", expand=False)


def decide(settings: Settings, approval_id: str, approver: str, approve: bool, reason: str | None) -> ApprovalDecision:
    packet, _ = load(settings, approval_id)
    key = Keyring(settings.home / "approvers").load(approver)
    client = ApprovalClient(
        settings.kafka_bootstrap,
        settings.topic_prefix,
        client_id=f"toolgate-approver-{approver}",
        kafka_config=client_config(settings),
    )
    return client.decide(packet, approver_id=approver, key=key, approve=approve, reason=reason)


JUDGMENT = """
SELECT action, detail FROM toolgate.audit_log WHERE action LIKE 'decision_%%' AND detail->>'decision_id' = %s
ORDER BY id DESC LIMIT 1
"""


def judgment(settings: Settings, decision_id: str, timeout: float = 15.0) -> dict[str, Any] | None:
    """How the approval-wait stage judged a decision (counted, no-op or refused, and why), read
    from the audit log; None when it has not been judged within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(settings.database_url, autocommit=True) as conn:
        while True:
            row = conn.execute(JUDGMENT, (decision_id,)).fetchone()
            if row is not None:
                action, detail = row
                return {"outcome": action.removeprefix("decision_"), **detail}
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.2)


REGISTER = """
INSERT INTO toolgate.approvers (approver_id, public_key, risk_classes, groups) VALUES (%s, %s, %s, %s)
ON CONFLICT (approver_id) DO UPDATE
SET public_key = excluded.public_key, risk_classes = excluded.risk_classes, groups = excluded.groups,
    status = 'active', revoked_at = NULL
"""


def register_approver(
    conn: psycopg.Connection[Any], approver: str, key: Ed25519PrivateKey, risk_classes: list[str], groups: list[str]
) -> None:
    """Record an approver's public key (the private key never reaches Postgres)."""
    conn.execute(REGISTER, (approver, public_bytes(key), risk_classes, groups))


def add_approver(settings: Settings, approver: str, risk_classes: list[str], groups: list[str]) -> str:
    key = new_key()
    path = Keyring(settings.home / "approvers").store(approver, key)
    with psycopg.connect(settings.database_url, autocommit=True) as conn:
        register_approver(conn, approver, key, risk_classes, groups)
    return str(path)


def list_approvers(settings: Settings) -> list[dict[str, Any]]:
    with psycopg.connect(settings.database_url) as conn:
        rows = conn.execute(
            "SELECT approver_id, status, risk_classes, groups, created_at FROM toolgate.approvers ORDER BY approver_id"
        ).fetchall()
    return [
        {"approver": r[0], "status": r[1], "risk_classes": r[2], "groups": r[3], "created_at": _when(r[4])}
        for r in rows
    ]


def revoke_approver(settings: Settings, approver: str) -> bool:
    with psycopg.connect(settings.database_url, autocommit=True) as conn:
        cur = conn.execute(
            "UPDATE toolgate.approvers SET status = 'revoked', revoked_at = now() "
            "WHERE approver_id = %s AND status = 'active'",
            (approver,),
        )
        return cur.rowcount == 1
