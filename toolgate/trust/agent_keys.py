"""Agents' signing keys: key ids, the local keyring, and the signer a client proposes with.

Postgres holds only public keys (`toolgate.agent_keys`); a private key stays on the agent's
host. For the embedded default and the CLI, the keyring under `$TOOLGATE_HOME/agents/`
holds the keys of agents that act from this machine, one directory per agent:

    agents/<agent_id>/agent.json        {"agent_id", "tenant_id", "scopes"} as registered
    agents/<agent_id>/<key_id>.pem      an Ed25519 private key (PKCS#8), readable by the owner only

A key id names a public key (`k_` and the first 16 hex digits of its SHA-256), so the same
key registered twice has the same id. An agent may hold several active keys (rotation): a
client signs with the newest one in its keyring.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from toolgate.schemas.models import ToolProposal
from toolgate.trust.ed25519 import PrivateKey
from toolgate.trust.proposal_signing import sign, sign_all, signed_with_digest
from toolgate.trust.signing import public_bytes

NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
# toolgate's own Kafka principals are `User:toolgate-<stage>`, `User:toolgate-operator` and
# `User:toolgate-mcp` (ops/acls.py), and an agent's is `User:<agent_id>`: no agent, approver or
# tenant is named like them.
RESERVED = re.compile(r"^toolgate(?:[-_]|$)")


def reserved(value: str) -> bool:
    """Whether a name is toolgate's own (`toolgate`, `toolgate-*`, `toolgate_*`)."""
    return RESERVED.match(value) is not None


def check_name(kind: str, value: str) -> str:
    """Agent, approver and tenant ids name directories, Kafka topics and Kafka principals:
    lower-case, digits, `_`, `-`, and never one of toolgate's own names (`reserved`)."""
    if not NAME.match(value):
        raise ValueError(f"bad {kind} id {value!r}: 1-63 of a-z, 0-9, '_', '-', starting with a letter or digit")
    if reserved(value):
        raise ValueError(
            f"{kind} id {value!r} is reserved: 'toolgate' and names starting with 'toolgate-' or 'toolgate_' "
            "are toolgate's own (the Kafka principals of its stages, operators and MCP door)"
        )
    return value


def key_id_of(public_key: bytes) -> str:
    return "k_" + hashlib.sha256(public_key).hexdigest()[:16]


def read_public_key(data: bytes) -> bytes:
    """A public key as raw bytes, from a PEM file, 32 raw bytes or their 64 hex digits."""
    text = data.strip()
    if text.startswith(b"-----BEGIN"):
        key = serialization.load_pem_public_key(text)
        if not isinstance(key, Ed25519PublicKey):
            raise ValueError("not an Ed25519 public key")
        return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    if len(text) == 64 and re.fullmatch(rb"[0-9a-fA-F]{64}", text):
        return bytes.fromhex(text.decode())
    if len(data) == 32:
        return data
    raise ValueError("expected an Ed25519 public key: PEM, 32 raw bytes or 64 hex digits")


@dataclass(frozen=True)
class AgentSigner:
    """What a client needs to propose as an agent."""

    agent_id: str
    tenant_id: str
    scopes: tuple[str, ...]
    key_id: str
    key: PrivateKey

    def sign(self, proposal: ToolProposal) -> ToolProposal:
        return sign(proposal, self.key_id, self.key)

    def sign_with_digest(self, proposal: ToolProposal) -> tuple[ToolProposal, str]:
        """The signed proposal and its digest (what toolgate's answer must name)."""
        return signed_with_digest(proposal, self.key_id, self.key)

    def sign_all(self, proposals: Sequence[ToolProposal]) -> list[tuple[ToolProposal, str]]:
        """Proposals published together, signed once (under one Merkle root), with their digests."""
        return sign_all(proposals, self.key_id, self.key)


class AgentKeyring:
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _dir(self, agent_id: str) -> Path:
        return self.directory / check_name("agent", agent_id)

    def store(self, agent_id: str, tenant_id: str, scopes: list[str], key: Ed25519PrivateKey) -> tuple[str, Path]:
        """Keep a private key (and what the agent was granted); returns its key id and file."""
        folder = self._dir(agent_id)
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        key_id = key_id_of(public_bytes(key))
        pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        path = folder / f"{key_id}.pem"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
        meta = {"agent_id": agent_id, "tenant_id": tenant_id, "scopes": list(scopes)}
        (folder / "agent.json").write_text(json.dumps(meta, indent=2))
        return key_id, path

    def has(self, agent_id: str) -> bool:
        return any(self._dir(agent_id).glob("k_*.pem"))

    def forget(self, agent_id: str, key_id: str | None = None) -> None:
        """Delete a revoked key (or all of an agent's keys) from this machine."""
        for path in self._dir(agent_id).glob(f"{key_id or 'k_*'}.pem"):
            path.unlink()

    def meta(self, agent_id: str) -> dict[str, object]:
        path = self._dir(agent_id) / "agent.json"
        if not path.exists():
            raise KeyError(f"agent {agent_id} has no keys in {self.directory}; see `toolgate agents add`")
        return dict(json.loads(path.read_text()))

    def signer(self, agent_id: str) -> AgentSigner:
        """The agent's newest key in this keyring."""
        meta = self.meta(agent_id)
        keys = sorted(self._dir(agent_id).glob("k_*.pem"), key=lambda p: p.stat().st_mtime_ns)
        if not keys:
            raise KeyError(f"agent {agent_id} has no private key in {self.directory}")
        key = serialization.load_pem_private_key(keys[-1].read_bytes(), password=None)
        if not isinstance(key, Ed25519PrivateKey):
            raise ValueError(f"{keys[-1]} is not an Ed25519 key")
        scopes = meta.get("scopes") or []
        assert isinstance(scopes, list)
        return AgentSigner(agent_id, str(meta["tenant_id"]), tuple(map(str, scopes)), keys[-1].stem, PrivateKey.of(key))
