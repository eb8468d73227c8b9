"""The checks of the approvers' decisions and the key's completion: approval.*, execution.once."""

from __future__ import annotations

from typing import Any

from .base import Failed, Skipped
from .bundle import Bundle, micros, parse_json
from .notes import b64, ed25519_ok


def approval_keys(b: Bundle) -> dict[str, dict[str, Any]]:
    keys = {str(a.get("approver_id")): a for a in b.data["keys"].get("approvers") or []}
    agent = b.data["keys"].get("agent")
    if agent is not None:
        keys["agent:" + str(agent.get("agent_id"))] = agent
    return keys


def signed_decision(b: Bundle, row: dict[str, Any], ticket: dict[str, Any] | None = None) -> dict[str, Any]:
    """A decision's signed object, once its signature and the fields it must name (of `ticket`,
    by default the approval's) hold."""
    ticket = b.section("approval")["ticket"] if ticket is None else ticket
    who = row.get("approver_id")
    signed = b64(row.get("signed"), f"decision {row.get('decision_id')}'s signed bytes")
    signer = approval_keys(b).get(str(who))
    if signer is None:
        raise Failed(f"decision {row.get('decision_id')} is by {who}, whose key the bundle does not hold")
    key = b64(signer.get("public_key"), f"{who}'s public key")
    if not ed25519_ok(key, b64(row.get("signature"), "a decision's signature"), signed):
        raise Failed(f"decision {row.get('decision_id')}'s signature does not verify under {who}'s key")
    document = parse_json(signed)
    named = {"decision_id": row.get("decision_id"), "approver_id": who}
    named |= {k: ticket.get(k) for k in ("approval_id", "tool_name", "tool_version", "payload_hash")}
    wrong = [k for k, v in named.items() if document.get(k) != v]
    if wrong:
        raise Failed(f"decision {row.get('decision_id')} names another {', '.join(wrong)} than the ticket's")
    return dict(document)


def decision_rows(b: Bundle) -> list[dict[str, Any]]:
    """The ticket's decisions that carry signed bytes. A decision stored without them (a row from
    before 0036) is neither counted nor failed; when none carries them, there is nothing to check."""
    rows = b.section("approval")["decisions"]
    if not rows:
        raise Skipped("the ticket has no decisions")
    signed = [row for row in rows if row.get("signed") is not None and row.get("signature") is not None]
    if not signed:
        raise Skipped(f"none of the ticket's {len(rows)} decision(s) carries signed bytes (not stored)")
    return signed


def approval_signatures(b: Bundle) -> str:
    rows = decision_rows(b)
    for row in rows:
        signed_decision(b, row)
    return f"{len(rows)} decision(s), each signed by its approver for this ticket and payload"


def approval_state_version(b: Bundle) -> str:
    ticket = b.section("approval")["ticket"]
    for row in decision_rows(b):
        if parse_json(b64(row["signed"], "a decision's signed bytes")).get("state_version") != ticket.get(
            "state_version"
        ):
            raise Failed(f"decision {row.get('decision_id')} signs another state version than the ticket's")
    return f"every decision signs the state version {ticket.get('state_version')!r}"


def counts_toward_quorum(b: Bundle, row: dict[str, Any], ticket: dict[str, Any]) -> str | None:
    """The approver an APPROVE decision counts for, or None: it does not count (its signature or
    naming fails, it denies, its approver was not active then or not of the ticket's risk class or
    groups, or it was made outside the window of `ticket`, the one it signed, or after its own expiry)."""
    try:
        signed = signed_decision(b, row, ticket)
    except (Failed, ValueError):
        return None
    approver = b.data["keys"].get("approvers") or []
    who = next((a for a in approver if a.get("approver_id") == signed.get("approver_id")), None)
    at = signed.get("decided_at_ms")
    if who is None or signed.get("decision") != "APPROVE" or not isinstance(at, int):
        return None
    revoked = who.get("revoked_at")
    active = micros(who.get("registered_at"), "registered_at") <= at * 1000 and (
        revoked is None or micros(revoked, "revoked_at") > at * 1000
    )
    groups = ticket.get("approver_groups") or []
    fits = ticket.get("risk_class") in (who.get("risk_classes") or []) and (
        not groups or bool(set(groups) & set(who.get("groups") or []))
    )
    created, expires = micros(ticket.get("created_at"), "created_at"), micros(ticket.get("expires_at"), "expires_at")
    timely = created // 1000 <= at <= expires // 1000 and at <= signed.get("expires_at_ms", -1)
    return str(who["approver_id"]) if active and fits and timely else None


def edit_of(b: Bundle) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """An edited call's edit: the editor's decision row and the original ticket it signed (None:
    the call is no edit, or the edit's signed bytes are null)."""
    edit = b.data.get("edit")
    if edit is None:
        return None
    row, ticket = edit["decision"], edit["ticket"]
    return None if row.get("signed") is None or row.get("signature") is None else (row, ticket)


def held_without_approval(b: Bundle) -> None:
    """A bundle without an approval: Failed when its policy decision allowed the call with
    approvals and the call executed anyway, else Skipped (the call was never held)."""
    if b.data.get("execution") is not None:
        for row in b.data.get("decisions") or []:
            needed = row.get("approvals") if isinstance(row, dict) else None
            if row.get("stage") == "policy" and row.get("outcome") == "allow" and type(needed) is int and needed >= 1:
                raise Failed(f"policy required {needed} approvals; the bundle holds none")
    raise Skipped("the bundle has no approval")


def approval_quorum(b: Bundle) -> str:
    if b.data.get("approval") is None:
        held_without_approval(b)
    ticket, edit = b.section("approval")["ticket"], edit_of(b)
    if ticket.get("status") != "APPROVED":
        raise Skipped(f"the ticket is {ticket.get('status')}, not APPROVED: no quorum to count")
    try:
        rows = decision_rows(b) if b.section("approval")["decisions"] else []  # none: nobody approved
    except Skipped:
        if edit is None:
            raise
        rows = []
    judged = [(row, ticket) for row in rows] + ([edit] if edit is not None else [])
    counted = [who for row, on in judged if (who := counts_toward_quorum(b, row, on)) is not None]
    number = len(set(counted)) if ticket.get("distinct_approvers") else len(counted)
    needed = ticket.get("required_approvals")
    if not isinstance(needed, int) or number < needed:
        raise Failed(
            f"{number} valid approval(s) by active approvers of the ticket's class and groups; {needed} needed"
        )
    return f"{number} valid approval(s), {needed} needed"


def execution_once(b: Bundle) -> str:
    execution = b.section("execution")
    status = execution["status"]
    if status == "EXPIRED":  # past its deduplication window: the status it ended in is kept
        status = f"EXPIRED from {execution.get('expired_from')}"
    if status not in ("COMPLETED", "EXPIRED from COMPLETED"):
        raise Failed(f"the idempotency key is {status}, not COMPLETED")
    executed = [r for r in b.data["audit"]["rows"] if r.get("action") == "executed"]
    if len(executed) != 1:
        raise Failed(f"{len(executed)} audit rows record the execution, not exactly one")
    return "the key COMPLETED, and one audit row records its execution"
