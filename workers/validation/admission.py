"""Who may be answered: the door of validation, one proposal at a time, before any gate.

    the proposal                                   outcome  what happens
    beyond the size limits, naming no call         Drop     dead-lettered, audited
    no proven signature (identity.py: Unproven)    Drop     dead-lettered, audited
    proven, but refused (identity.py: Refused)     Refuse   PERMISSION_DENIED, own tenant
    proven, beyond the size limits                 Refuse   OUT_OF_BOUNDS, own tenant
    proven, in limits                              Proven   goes on to the gates
    proven, its call_id bound to another proposal  Refuse   SIGNATURE_MISMATCH (call_id_reused)
    proven, its agent past its admission rate      Refuse   RATE_LIMITED, with the time to wait
                                                            (admission_rate.py; before any gate)
    refused, a copy of a call already bound        Drop     audited (`copy_dropped`), never
      (same tenant, call_id and digest)                       answered

Every Drop and Refuse carries the audit entry that records it, every value from the proposal
within its limit; a Drop's is audited collapsed into counts (workers/runtime/refusals.py), and so
is a dropped copy's (anyone who captured a proposal can replay it). Only a proven signature earns
an answer, and it goes to the tenant the registry names; a refusal carries none of the oversized
text (limits.trimmed).

One answer per call: a call bound to its digest (callers.py) was, or will be, answered by its
first delivery. A copy of it that is refused here (replayed past its signature's window, sent
again from another tenant) is that same call, and a refusal now would publish a second,
contradictory final for it, signed and naming its digest (review N3): it is dropped instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from toolgate.schemas.models import FieldError, Principal, TaxonomyClass, ToolProposal
from toolgate.store.audit import Entry
from toolgate.store.audit_entry import bounded
from toolgate.trust.merkle import CheckedRoots
from toolgate.workers.runtime.freshness import Bound
from toolgate.workers.validation import limits
from toolgate.workers.validation.identity import Proven, Refused, RegisteredAgent, Unproven, authenticate

STAGE = "validation"


@dataclass(frozen=True)
class Drop:
    """Nobody proven to answer: the operator gets the bytes as a dead letter."""

    taxonomy_class: TaxonomyClass
    reason: str
    entry: Entry


@dataclass(frozen=True)
class Refuse:
    """A proven caller, refused at the door: it hears why, in its own tenant."""

    proposal: ToolProposal  # as it may be answered: in the agent's own tenant, trimmed
    taxonomy_class: TaxonomyClass
    errors: tuple[FieldError, ...]
    digest: str
    entry: Entry
    retry_after_ms: int | None = None


def screen(
    proposal: ToolProposal,
    record_bytes: int,
    agent: RegisteredAgent | None,
    now_ms: int,
    window: Bound,
    roots: CheckedRoots | None = None,
) -> Drop | Refuse | Proven:
    """The size limits, then the signature (identity.authenticate, with the roots checked before)."""
    oversized = limits.check(proposal, record_bytes)
    if oversized is not None and not oversized.answerable:  # names no call to answer
        unanswerable = Unproven(oversized.errors[0].code, "oversized")
        reason = "the proposal is beyond toolgate's size limits and names no call that can be answered"
        return Drop(
            TaxonomyClass.OUT_OF_BOUNDS, reason, refusal_entry(proposal, unanswerable, TaxonomyClass.OUT_OF_BOUNDS)
        )
    identity = authenticate(proposal, agent, now_ms, window, roots)
    if isinstance(identity, Unproven):
        return Drop(TaxonomyClass.PERMISSION_DENIED, identity.reason, refusal_entry(proposal, identity))
    if isinstance(identity, Refused):
        error = FieldError(field="principal", code=identity.code, message=identity.reason)
        entry = refusal_entry(proposal, identity)
        return Refuse(
            _answerable(proposal, identity), TaxonomyClass.PERMISSION_DENIED, (error,), identity.digest, entry
        )
    if oversized is not None:
        too_big = Refused(identity.tenant_id, oversized.errors[0].code, "oversized", identity.digest)
        entry = refusal_entry(proposal, too_big, TaxonomyClass.OUT_OF_BOUNDS)
        return Refuse(
            _answerable(proposal, too_big), TaxonomyClass.OUT_OF_BOUNDS, oversized.errors, identity.digest, entry
        )
    return identity


def _answerable(proposal: ToolProposal, identity: Refused) -> ToolProposal:
    """The proposal as a refusal may carry it back: trimmed, in the agent's own tenant."""
    return limits.trimmed(proposal).model_copy(update={"tenant_id": identity.tenant_id})


def as_registered(proposal: ToolProposal, identity: Proven) -> ToolProposal:
    """The proposal as the registry vouches for it: its agent's tenant, the scopes it asked for
    within those it was granted."""
    p = proposal.principal
    principal = Principal(user_id=p.user_id, agent_id=p.agent_id, scopes=list(identity.scopes))
    return proposal.model_copy(update={"tenant_id": identity.tenant_id, "principal": principal})


def call_id_reused(proposal: ToolProposal, identity: Proven) -> Refuse:
    """A proven proposal whose call_id this tenant already bound to another proposal."""
    reused = Refused(
        identity.tenant_id,
        "call_id_reused",
        f"call_id {proposal.call_id} already names another proposal of this tenant; use a new call_id",
        identity.digest,
    )
    entry = refusal_entry(proposal, reused, TaxonomyClass.SIGNATURE_MISMATCH)
    error = FieldError(field="call_id", code=reused.code, message=reused.reason)
    return Refuse(proposal, TaxonomyClass.SIGNATURE_MISMATCH, (error,), identity.digest, entry)


def rate_limited(proposal: ToolProposal, digest: str, retry_after_ms: int) -> Refuse:
    """A proven proposal whose agent has spent the validation work it may spend for now."""
    agent = proposal.principal.agent_id
    reason = f"agent {agent} has spent the validation work it may spend for now; retry in {retry_after_ms} ms"
    limited = Refused(proposal.tenant_id, "admission_rate", reason, digest)
    entry = refusal_entry(proposal, limited, TaxonomyClass.RATE_LIMITED)
    error = FieldError(field=None, code=limited.code, message=reason)
    return Refuse(proposal, TaxonomyClass.RATE_LIMITED, (error,), digest, entry, retry_after_ms)


def refusal_entry(
    proposal: ToolProposal,
    identity: Refused | Unproven,
    taxonomy_class: TaxonomyClass = TaxonomyClass.PERMISSION_DENIED,
) -> Entry:
    """The audit entry of a refusal at the door: every value from the proposal within its limit
    (a proposal that proves nobody chose them all)."""
    call_id = limits.routable(proposal.call_id)
    proposal = limits.trimmed(proposal)
    return Entry(
        STAGE,
        "refused",
        f"agent:{proposal.principal.agent_id}",
        call_id,
        identity.tenant_id if isinstance(identity, Refused) else None,
        {
            "taxonomy": str(taxonomy_class),
            "code": identity.code,
            "agent": proposal.principal.agent_id,
            "key_id": bounded(proposal.key_id, limits.FIELD_LIMITS["key_id"]),
            "claimed_tenant": proposal.tenant_id,
            "tool": proposal.tool_name,
            "proven": isinstance(identity, Refused),
        },
    )


def undecodable_entry(call_id: str | None) -> Entry:
    """Bytes that are no ToolProposal prove nobody; the audit log still records them, with the
    call_id their header claims only when it is within its limit."""
    detail = {"taxonomy": str(TaxonomyClass.SYNTACTIC_PARSE_FAIL), "code": "undecodable_proposal", "proven": False}
    return Entry(STAGE, "refused", "unknown", limits.routable(call_id) if call_id else None, None, detail)


def copy_dropped(refused: Refuse) -> Entry:
    """The audit entry of a refused copy of a call already bound: recorded, never answered."""
    entry = refused.entry
    detail = {**entry.detail, "refusal": entry.detail.get("code"), "code": "copy_of_bound_call", "answered": False}
    return Entry(entry.stage, entry.action, entry.actor, entry.call_id, entry.tenant_id, detail)
