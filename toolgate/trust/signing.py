"""Approval decisions are signed with the approver's Ed25519 key.

The signed bytes are the RFC 8785 canonical JSON of every field of the ApprovalDecision
except `signature` (and each field added since 0.1.0, `state_version`, `trace_id` and
`approval_scope`, when it is null, so decisions signed before it existed still verify), so any
approval service in any language can produce them. A client signs
only after recomputing the payload hash from the arguments the packet shows (`check_packet`):
the hash is what execution is bound to, the arguments are what the approver read. toolgate holds
only public keys (table `toolgate.approvers`); private keys stay with approvers. For the
embedded default and the CLI, a local keyring under `$TOOLGATE_HOME/approvers/` holds the
demo approvers' private keys, one PEM file each, readable by the owner only.
"""

from __future__ import annotations

import os
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from toolgate.schemas.hashing import payload_hash
from toolgate.schemas.models import ApprovalDecision, ApprovalRequest, Verdict
from toolgate.schemas.wire import canonical_json


class PacketMismatch(ValueError):
    """A confirmation packet whose payload hash is not the hash of the arguments it shows:
    signing it would approve something other than what the approver read."""


def check_packet(packet: ApprovalRequest) -> None:
    """Refuse a packet unless its payload hash is recomputed from the arguments it shows."""
    shown = payload_hash(packet.arguments)
    if shown != packet.payload_hash:
        raise PacketMismatch(
            f"approval {packet.approval_id}: its payload hash {packet.payload_hash} is not the hash of the "
            f"arguments it shows ({shown}); not signed"
        )


# The one scope toolgate grants an approval: one execution of the payload it names (the ticket is
# spent when the operation ends). A decision naming no scope means this one; any other is refused.
SINGLE_EXECUTION = "single_execution"

# Fields added to the decision since 0.1.0: signed when present, left out of the signed bytes when null.
ADDED = ("state_version", "trace_id", "approval_scope", "edited_arguments")


def decision_document(
    packet: ApprovalRequest,
    approver_id: str,
    approve: bool,
    reason: str | None,
    decision_id: str,
    now_ms: int,
    valid_for_s: int = 300,
    edited_arguments: str | None = None,
) -> ApprovalDecision:
    """The decision an approver signs on `packet`, not yet signed (its signature empty): the one
    document the CLI, ApprovalClient and the console's browsers all sign (`signed_bytes`);
    `edited_arguments`, an approval of edited arguments (contracts/edits.py `edited_text`)."""
    return ApprovalDecision(
        decision_id=decision_id,
        approval_id=packet.approval_id,
        decision=Verdict.APPROVE if approve else Verdict.DENY,
        approver_id=approver_id,
        tool_name=packet.tool_name,
        tool_version=packet.tool_version,
        payload_hash=packet.payload_hash,
        reason=reason,
        decided_at_ms=now_ms,
        expires_at_ms=now_ms + valid_for_s * 1000,
        state_version=packet.state_version,
        trace_id=packet.trace_id,
        approval_scope=SINGLE_EXECUTION,
        edited_arguments=edited_arguments,
        signature=b"",
    )


# A withdrawal (workers/approval/withdrawal.py) is a DENY signed by the held call's own agent, which
# it names as `agent:<agent_id>` where an approver id stands: no approver id has a colon.
WITHDRAWER_PREFIX = "agent:"


def withdrawer(agent_id: str) -> str:
    """How an agent is named where an approver id stands in its withdrawal."""
    return WITHDRAWER_PREFIX + agent_id


def withdrawing_agent(approver_id: str) -> str | None:
    """The agent a withdrawal names; None: the decision is an approver's."""
    return approver_id[len(WITHDRAWER_PREFIX) :] if approver_id.startswith(WITHDRAWER_PREFIX) else None


def signed_bytes(decision: ApprovalDecision) -> bytes:
    excluded = {"signature", *(name for name in ADDED if getattr(decision, name) is None)}
    fields = decision.model_dump(mode="json", exclude=excluded)
    return canonical_json(fields).encode()


def sign(decision: ApprovalDecision, key: Ed25519PrivateKey) -> ApprovalDecision:
    return decision.model_copy(update={"signature": key.sign(signed_bytes(decision))})


def verify(decision: ApprovalDecision, public_key: bytes) -> bool:
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(decision.signature, signed_bytes(decision))
    except (InvalidSignature, ValueError):
        return False
    return True


def new_key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


def public_bytes(key: Ed25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


class Keyring:
    """Private keys of approvers who act from this machine."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path(self, approver_id: str) -> Path:
        if not approver_id or "/" in approver_id or approver_id.startswith("."):
            raise ValueError(f"bad approver id {approver_id!r}")
        return self.directory / f"{approver_id}.pem"

    def store(self, approver_id: str, key: Ed25519PrivateKey) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = self.path(approver_id)
        pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
        return path

    def load(self, approver_id: str) -> Ed25519PrivateKey:
        path = self.path(approver_id)
        if not path.exists():
            raise KeyError(f"no private key for approver {approver_id} in {self.directory}")
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
        if not isinstance(key, Ed25519PrivateKey):
            raise ValueError(f"{path} is not an Ed25519 key")
        return key

    def has(self, approver_id: str) -> bool:
        return self.path(approver_id).exists()
