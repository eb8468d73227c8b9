"""Who asked: the first gate of validation, before anything in the proposal is believed.

A pure function of the proposal, the registry's record of the agent it names, and the time.
Nothing a proposal says about itself counts until its signature verifies against an active
key of an active, registered agent; then the tenant comes from the registry and the scopes
are what it asked for within what it was granted.

| the proposal                                   | outcome    | what the agent hears        |
|------------------------------------------------|------------|-----------------------------|
| no signature or no key id                      | Unproven   | nothing: dead-lettered      |
| an agent the registry does not know            | Unproven   | nothing: dead-lettered      |
| a key the agent never registered               | Unproven   | nothing: dead-lettered      |
| a revoked agent, or a revoked key              | Unproven   | nothing: dead-lettered      |
| a signature that does not verify               | Unproven   | nothing: dead-lettered      |
| signed, but for another tenant than the agent's| Refused    | PERMISSION_DENIED, own tenant|
| signed, created_at outside the allowed window  | Refused    | PERMISSION_DENIED, own tenant|
| signed, in its own tenant, in time             | Proven     | goes on: the gates decide   |

Every outcome but Proven is audited by the worker. Only a proven signature earns an answer,
and the answer goes to the tenant the registry names, never to the one the record claims.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from toolgate.refusal import Refusal
from toolgate.schemas.models import ToolProposal
from toolgate.trust.ed25519 import PublicKey
from toolgate.trust.merkle import CheckedRoots
from toolgate.trust.proposal_signing import verified
from toolgate.workers.runtime.freshness import Bound


@dataclass(frozen=True)
class AgentKey:
    public_key: PublicKey
    active: bool


@dataclass(frozen=True)
class RegisteredAgent:
    agent_id: str
    tenant_id: str
    scopes: frozenset[str]
    active: bool
    keys: Mapping[str, AgentKey] = field(default_factory=dict)


@dataclass(frozen=True)
class Proven:
    tenant_id: str
    scopes: tuple[str, ...]  # requested ∩ granted, in the order requested
    digest: str
    document: bytes  # the signing document's bytes that verified (proposal_signing.verified)


@dataclass(frozen=True)
class Unproven(Refusal):
    """Nothing proves who asked: dead-lettered and audited, never answered."""


@dataclass(frozen=True)
class Refused:
    tenant_id: str  # the agent's own, from the registry
    code: str
    reason: str
    digest: str


Identity = Proven | Unproven | Refused


def authenticate(
    proposal: ToolProposal,
    agent: RegisteredAgent | None,
    now_ms: int,
    window: Bound,
    roots: CheckedRoots | None = None,
) -> Identity:
    """Who asked, as the table above says. `roots` remembers the tree roots whose signatures were
    checked (proposals an agent signed together), so each costs one check, not one a proposal."""
    agent_id = proposal.principal.agent_id
    if not proposal.signature or not proposal.key_id:
        return Unproven("unsigned", f"the proposal of agent {agent_id!r} carries no signature")
    if agent is None:
        return Unproven("unknown_agent", f"no agent {agent_id!r} is registered")
    key = agent.keys.get(proposal.key_id)
    if key is None:
        return Unproven("unknown_key", f"agent {agent_id} has no key {proposal.key_id}")
    if not agent.active:
        return Unproven("revoked_agent", f"agent {agent_id} is revoked")
    if not key.active:
        return Unproven("revoked_key", f"key {proposal.key_id} of agent {agent_id} is revoked")
    held = verified(proposal, key.public_key, roots)
    if held is None:
        return Unproven("bad_signature", f"the signature does not verify against key {proposal.key_id} of {agent_id}")
    call_digest, document = held
    if proposal.tenant_id != agent.tenant_id:
        return Refused(
            agent.tenant_id,
            "tenant_mismatch",
            f"agent {agent_id} acts for tenant {agent.tenant_id}, not {proposal.tenant_id}",
            call_digest,
        )
    age = now_ms - proposal.created_at_ms
    if age > window.max_age_ms or -age > window.future_ms:
        return Refused(
            agent.tenant_id,
            "stale_proposal" if age > 0 else "future_proposal",
            f"created_at is {abs(age) // 1000} s in the {'past' if age > 0 else 'future'}; allowed: "
            f"{window.max_age_ms // 1000} s back, {window.future_ms // 1000} s ahead. Sign the proposal again",
            call_digest,
        )
    scopes = tuple(s for s in dict.fromkeys(proposal.principal.scopes) if s in agent.scopes)
    return Proven(agent.tenant_id, scopes, call_digest, document)
