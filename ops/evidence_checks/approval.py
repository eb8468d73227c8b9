"""The approvers' signed decisions on the call's ticket: `approval.signatures`,
`approval.state_version`, `approval.quorum` (docs/evidence.md, "Checks"). Each decision's signed
bytes are read as the ApprovalDecision they are and checked by toolgate/trust/signing.py's
`verify` (the bytes must be exactly the ones it signs, and its signature hold); a withdrawal,
signed by the call's own agent (`agent:<id>`), with the agent's key. A decision stored without its
signed bytes (before 0036) is neither counted nor failed; a ticket none of whose decisions carries
them, and a call never held for approval, skip all three, except that a call its policy held for
approvals which executed with no approval in the bundle fails its quorum. An edited call's editor
is counted once, by the signed edit on the original ticket (the bundle's `edit`, judged against
that ticket), since the editor's vote on the edited ticket is stored unsigned."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pydantic

from toolgate.ops.evidence_checks.trust import b64, json_of, ms_of, part, public_key
from toolgate.ops.evidence_checks.verdict import Check, failed, first_failure, ok, skipped
from toolgate.schemas.models import ApprovalDecision, Verdict
from toolgate.trust.ed25519 import PublicKey
from toolgate.trust.signing import signed_bytes, verify, withdrawing_agent

NOT_HELD = "the call was never held for approval (no approval in the bundle)"


@dataclass(frozen=True)
class Signed:
    """One decision of the bundle as its approver signed it, and whether its signature held."""

    row: dict[str, Any]
    decision: ApprovalDecision | None  # None: its signed bytes are not an approval decision
    problem: str | None  # why it does not count as signed (None: it does)


def decisions(bundle: Any) -> list[Signed]:
    """The ticket's decisions that carry signed bytes: a decision stored without them (a row from
    before 0036) is neither counted nor failed."""
    approval = bundle["approval"]
    return [_signed(bundle, approval["ticket"], row) for row in rows_of(bundle) if _carries_signature(row)]


def rows_of(bundle: Any) -> list[Any]:
    """The ticket's decision rows (none when the bundle holds null; Malformed when it has no field)."""
    return list(part(bundle, "approval", "decisions") or [])


def _carries_signature(row: Any) -> bool:
    return row.get("signed") is not None and row.get("signature") is not None


def _unsigned(bundle: Any) -> str | None:
    """Why the approval checks are skipped (None: they are made): the call was never held, or its
    ticket's decisions were all stored without their signed bytes."""
    if bundle.get("approval") is None:
        return NOT_HELD
    found = rows_of(bundle)
    if found and not any(_carries_signature(row) for row in found):
        return f"none of the ticket's {len(found)} decision(s) carries signed bytes (stored before 0036)"
    return None


def _signed(bundle: Any, ticket: dict[str, Any], row: dict[str, Any]) -> Signed:
    who = row.get("approver_id")
    raw = b64(row["signed"], "a decision's signed bytes")
    try:
        decision = ApprovalDecision.model_validate(
            {**json_of(raw, "a decision's signed bytes"), "signature": b64(row["signature"], "a decision's signature")}
        )
    except pydantic.ValidationError:
        return Signed(row, None, f"decision {row.get('decision_id')}'s signed bytes are not an approval decision")
    key = _key_of(bundle, str(who))
    if key is None:
        return Signed(row, decision, f"approver {who} is not among the bundle's keys")
    if signed_bytes(decision) != raw or not verify(decision, key.raw):
        return Signed(row, decision, f"the signature of decision {decision.decision_id} by {who} does not verify")
    named = {
        "decision_id": (decision.decision_id, row.get("decision_id")),
        "approver_id": (decision.approver_id, who),
        "approval_id": (decision.approval_id, ticket.get("approval_id")),
        "tool_name": (decision.tool_name, ticket.get("tool_name")),
        "tool_version": (decision.tool_version, ticket.get("tool_version")),
        "payload_hash": (decision.payload_hash, ticket.get("payload_hash")),
    }
    for field, (said, wanted) in named.items():
        if said != wanted:
            return Signed(row, decision, f"decision {decision.decision_id} signs {field} {said!r}, not {wanted!r}")
    return Signed(row, decision, None)


def _key_of(bundle: Any, who: str) -> PublicKey | None:
    """`who`'s key: every entry of keys.approvers is read (one that is not an object fails)."""
    approvers = {str(a.get("approver_id")): a for a in bundle["keys"].get("approvers") or []}
    agent = withdrawing_agent(who)
    if agent is not None:
        row = bundle["keys"].get("agent") or {}
        return public_key(row["public_key"], "keys.agent.public_key") if row.get("agent_id") == agent else None
    approver = approvers.get(who)
    return None if approver is None else public_key(approver.get("public_key"), f"approver {who}'s public key")


def signatures(bundle: Any) -> Check:
    name = "approval.signatures"
    unsigned = _unsigned(bundle)
    if unsigned is not None:
        return skipped(name, unsigned)
    found = decisions(bundle)
    if not found:
        return skipped(name, "the ticket has no decisions")
    problems = [s.problem for s in found if s.problem is not None]
    return first_failure(name, problems, f"{len(found)} signed decision(s), each signed by its approver")


def state_version(bundle: Any) -> Check:
    """What each decision signed, compared with the ticket's state version: it needs no key (that
    the signatures hold is approval.signatures')."""
    name = "approval.state_version"
    unsigned = _unsigned(bundle)
    if unsigned is not None:
        return skipped(name, unsigned)
    wanted = part(bundle, "approval", "ticket").get("state_version")
    found = [row for row in rows_of(bundle) if _carries_signature(row)]
    if not found:
        return skipped(name, "the ticket has no decisions")
    problems = []
    for row in found:
        what = f"decision {row.get('decision_id')}'s signed bytes"
        said = json_of(b64(row["signed"], what), what).get("state_version")
        if said != wanted:
            problems.append(
                f"decision {row.get('decision_id')} signs state version {said!r}, the ticket's is {wanted!r}"
            )
    return first_failure(name, problems, f"every decision signs the ticket's state version {wanted!r}")


def quorum(bundle: Any) -> Check:
    name = "approval.quorum"
    if bundle.get("approval") is None:
        unheld = held_without_approval(bundle)
        return skipped(name, NOT_HELD) if unheld is None else failed(name, unheld)
    edit = editor(bundle)
    unsigned = _unsigned(bundle)
    if unsigned is not None and edit is None:
        return skipped(name, unsigned)
    ticket = part(bundle, "approval", "ticket")
    if ticket.get("status") != "APPROVED":
        return skipped(name, f"the ticket is {ticket.get('status')}, not APPROVED")
    required = int(part(ticket, "required_approvals"))
    counted: list[str] = []
    refused: list[str] = []
    for s, judged_on in [(s, ticket) for s in decisions(bundle)] + ([edit] if edit else []):
        if s.problem is not None or s.decision is None:
            refused.append(f"decision {s.row.get('decision_id')} is not counted: {s.problem}")
            continue
        if s.decision.decision is not Verdict.APPROVE:
            continue
        why = _not_counted(bundle, judged_on, s.decision)
        refused += [why] if why else []
        counted += [] if why else [s.decision.approver_id]
    voters = len(set(counted)) if ticket.get("distinct_approvers", True) else len(counted)
    if voters >= required:
        return ok(name, f"{voters} of {required} required approvals: {', '.join(sorted(set(counted)))}")
    reasons = "; ".join(refused[:2])
    return failed(name, f"{voters} valid approval(s) of {required} required" + (f": {reasons}" if reasons else ""))


def editor(bundle: Any) -> tuple[Signed, dict[str, Any]] | None:
    """An edited call's edit: the editor's signed decision and the original ticket it is judged on
    (None: the call is no edit, or its edit's signed bytes were not stored)."""
    edit = bundle.get("edit")
    if edit is None:
        return None
    row, ticket = part(edit, "decision"), part(edit, "ticket")
    return (_signed(bundle, ticket, row), ticket) if _carries_signature(row) else None


def held_without_approval(bundle: Any) -> str | None:
    """Why a bundle without an approval fails its quorum (None: it does not): its policy decision
    allowed the call with approvals, and the call executed."""
    if bundle.get("execution") is None:
        return None
    for row in bundle.get("decisions") or []:
        needed = row.get("approvals") if isinstance(row, dict) else None
        if row.get("stage") == "policy" and row.get("outcome") == "allow" and type(needed) is int and needed >= 1:
            return f"policy required {needed} approvals; the bundle holds none"
    return None


def _not_counted(bundle: Any, ticket: dict[str, Any], decision: ApprovalDecision) -> str | None:
    """Why a signed APPROVE does not count toward the ticket's quorum (None: it counts)."""
    who, at = decision.approver_id, decision.decided_at_ms
    approver = next((a for a in bundle["keys"].get("approvers") or [] if a.get("approver_id") == who), None)
    if approver is None:
        return f"{who} is not an approver"
    revoked = approver.get("revoked_at")
    if ms_of(part(approver, "registered_at"), "registered_at") > at or (
        revoked is not None and ms_of(revoked, "revoked_at") <= at
    ):
        return f"{who} was not an active approver when deciding"
    if ticket.get("risk_class") not in (approver.get("risk_classes") or []):
        return f"{who} may not approve {ticket.get('risk_class')} calls"
    groups = ticket.get("approver_groups") or []
    if groups and not set(groups) & set(approver.get("groups") or []):
        return f"{who} is in none of the ticket's groups"
    if not ms_of(part(ticket, "created_at"), "created_at") <= at <= ms_of(part(ticket, "expires_at"), "expires_at"):
        return f"{who} decided outside the ticket's window"
    if at > decision.expires_at_ms:
        return f"{who}'s decision was past its own expiry"
    return None
