"""Operator commands for held calls: list, show (the confirmation card, ops/approval_card.py),
decide.

An approval id is taken as any prefix of one (`resolve`): a prefix naming exactly one ticket is
that ticket (its full id is what is signed and printed); one naming several is refused with them,
and nothing is signed. An approver is offered only what it may decide: `list_approvals(approver=...)`
lists the tickets of the tenants it serves, and `decide` signs nothing for another tenant
(approval-wait would refuse it anyway, `approver_not_for_tenant`). Approvers themselves are
managed in ops/approvers.py."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Sequence
from typing import Any

import psycopg
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from toolgate.client import ApprovalClient
from toolgate.contracts.edits import diff
from toolgate.contracts.registry import load_registry
from toolgate.kafka_security import APPROVALS, client_config
from toolgate.ops.approval_card import shown
from toolgate.ops.registry import as_listed, read, utc_text
from toolgate.ops.tables import id_column, print_table, text_column
from toolgate.schemas.models import ApprovalDecision, ApprovalRequest
from toolgate.settings import Settings
from toolgate.store import approvals, approvers, audit, edits, open_approvals
from toolgate.topics.catalog import Topics
from toolgate.trust.signing import Keyring
from toolgate.workers.runtime.wakeup import announce

CANDIDATES = 5  # the ids a prefix is looked up among: more than one is refused, a few are named


def _when(ts: dt.datetime | None) -> str:
    return utc_text(ts) if ts else "-"


def list_approvals(
    settings: Settings, status: str | None, limit: int = 50, approver: str | None = None
) -> list[dict[str, Any]]:
    """The newest tickets (of `status`; of the tenants `approver` decides for, when given)."""
    rows = read(settings.database_url, approvals.listed, status, limit, approver)
    names = {"tool_name": "tool", "tool_version": "version", "tenant_id": "tenant", "required_approvals": "required"}
    return [as_listed(r, **names) for r in rows]


def print_list(rows: list[dict[str, Any]], console: Console) -> None:
    table = Table(title="approvals", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
    id_column(table, "approval_id", (shown(r["approval_id"]) for r in rows))
    for col in ("status", "tool", "risk_class", "tenant", "approved", "expires_at"):
        text_column(table, col)
    lines = []
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
        lines.append(Text(shown("  ".join(cells))))
    print_table(console, table, lines)


class Unresolved(Exception):
    """A typed approval id that names no ticket, or several: nothing is shown or signed."""


def resolved(typed: str, matches: Sequence[str]) -> str:
    """The approval id `typed` names, among `matches` (the ids that start with it, up to
    CANDIDATES): the one that is `typed` whole, else the only one; Unresolved otherwise."""
    if typed in matches:
        return typed
    if typed and len(matches) == 1:
        return matches[0]
    if not typed or not matches:
        raise Unresolved(f"no approval {typed}")
    more = ", ..." if len(matches) >= CANDIDATES else ""
    raise Unresolved(f"{typed} is the start of several approval ids: {', '.join(matches)}{more}; type more of one")


def resolve(settings: Settings, typed: Sequence[str]) -> list[str]:
    """The approval id each of `typed` names (any unique prefix of one); Unresolved for the first
    that names none or several."""
    with psycopg.connect(settings.database_url) as conn:
        return [resolved(t, open_approvals.by_prefix(conn, t, CANDIDATES)) for t in typed]


def _card(conn: psycopg.Connection[Any], approval_id: str) -> approvals.Card:
    found = approvals.card(conn, approval_id)
    if found is None:
        raise SystemExit(f"no approval {approval_id}")
    return found


def load(settings: Settings, approval_id: str) -> tuple[ApprovalRequest, dict[str, Any]]:
    with psycopg.connect(settings.database_url) as conn:
        found = _card(conn, approval_id)
        decisions = approvals.decisions(conn, approval_id)
        edit = edits.edit_state(conn, approval_id)
    packet = ApprovalRequest.model_validate(found.packet)
    state: dict[str, Any] = {
        "status": found.status,
        "decided_at": _when(found.decided_at),
        "decisions": [
            {"approver": d.approver_id, "verdict": d.verdict, "reason": d.reason, "at": _when(d.decided_at)}
            for d in decisions
        ],
    }
    edited = edit_shown(edit, packet.arguments)
    if edited is not None:
        state["edit"] = edited
    return packet, state


def edit_shown(edit: edits.EditState | None, arguments: dict[str, Any]) -> dict[str, Any] | None:
    """A ticket's part in an edit, as the card shows it (None: it had none): the ticket an edit
    closed names its editor and where the edited call waits; an edited call's names the ticket
    it was edited from, by whom, and the difference from the arguments held there."""
    if edit is None:
        return None
    if edit.edited_by is not None:
        return {"edited_by": edit.edited_by, "edited_into": edit.edited_into}
    if edit.edit_of is not None:
        changes = diff(edit.held_arguments or {}, arguments)
        return {"edited_from": edit.edit_of, "edited_by": edit.edit_of_by, "diff": [c.as_json() for c in changes]}
    return None


class NotServed(Exception):
    """The approver does not decide for the ticket's tenant (or is not an active approver)."""


def _signer(settings: Settings, approver: str) -> tuple[Ed25519PrivateKey, ApprovalClient]:
    """The approver's key from the local keyring, and a client to publish its decisions."""
    key = Keyring(settings.home / "approvers").load(approver)
    client = ApprovalClient(
        settings.kafka_bootstrap,
        settings.topic_prefix,
        client_id=f"toolgate-approver-{approver}",
        kafka_config=client_config(settings, APPROVALS),
    )
    return key, client


def decide(
    settings: Settings, approval_ids: Sequence[str], approver: str, approve: bool, reason: str | None
) -> list[ApprovalDecision]:
    """Sign and publish a decision as `approver` on each ticket (full ids), one signed decision
    per ticket, in order. Nothing is signed when it does not decide for a ticket's tenant
    (NotServed) or a packet's hash is not that of its arguments (signing.PacketMismatch)."""
    with psycopg.connect(settings.database_url) as conn:  # every packet and check on one connection
        packets = [ApprovalRequest.model_validate(_card(conn, a).packet) for a in approval_ids]
        for packet in packets:
            if not approvers.serves(conn, approver, packet.tenant_id):
                raise NotServed(f"{approver} is not an active approver of tenant {packet.tenant_id}")
    key, client = _signer(settings, approver)
    decisions = client.decide_many(packets, approver_id=approver, key=key, approve=approve, reason=reason)
    announce(settings.database_url, Topics(settings.topic_prefix).approvals_decisions)  # approval-wait may nap
    return decisions


def edit(settings: Settings, approval_id: str, approver: str, changes: dict[str, Any]) -> ApprovalDecision:
    """Sign and publish an approval of edited arguments on one ticket (issue 52, part 3): `changes`
    merged over the held arguments (contracts/edits.py). Refused before anything is signed
    (contracts.edits.EditRefused) when the edit does not only narrow what the call's contract
    allows, and as `decide` refuses."""
    with psycopg.connect(settings.database_url) as conn:
        packet = ApprovalRequest.model_validate(_card(conn, approval_id).packet)
        if not approvers.serves(conn, approver, packet.tenant_id):
            raise NotServed(f"{approver} is not an active approver of tenant {packet.tenant_id}")
    contract = load_registry(settings.contracts_dir).get(packet.tool_name, packet.tool_version)
    key, client = _signer(settings, approver)
    decision = client.decide(packet, approver_id=approver, key=key, approve=True, edit=changes, contract=contract)
    announce(settings.database_url, Topics(settings.topic_prefix).approvals_decisions)
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


def edited_into(settings: Settings, approval_id: str, timeout: float) -> str | None:
    """The ticket the edited call of `approval_id` is held under, once approval-wait opened it;
    None when none was within `timeout` seconds (the edited call needed no approval, or validation
    or policy refused it: the agent's observation says which)."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(settings.database_url, autocommit=True) as conn:
        while True:
            found = edits.edited_into(conn, approval_id)
            if found is not None or time.monotonic() >= deadline:
                return found
            time.sleep(0.2)


def judgments(settings: Settings, decision_ids: Sequence[str], timeout: float) -> list[dict[str, Any] | None]:
    """`judgment` of each decision, all within the one `timeout` (approval-wait judges them
    together)."""
    deadline = time.monotonic() + timeout
    return [judgment(settings, d, max(deadline - time.monotonic(), 0.0)) for d in decision_ids]
