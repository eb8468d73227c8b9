"""Agents' keys: ids, the keyring, public key files; and the per-tenant topic names they read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from tests.unit.factories import proposal
from toolgate.topics.catalog import Topics
from toolgate.trust.agent_keys import AgentKeyring, check_name, key_id_of, read_public_key
from toolgate.trust.ed25519 import PublicKey
from toolgate.trust.proposal_signing import verify
from toolgate.trust.signing import new_key, public_bytes


def test_a_key_id_names_its_public_key() -> None:
    key = new_key()
    assert key_id_of(public_bytes(key)) == key_id_of(public_bytes(key))
    assert key_id_of(public_bytes(key)).startswith("k_") and len(key_id_of(public_bytes(key))) == 18
    assert key_id_of(public_bytes(new_key())) != key_id_of(public_bytes(key))


def test_public_keys_are_read_from_pem_hex_or_raw_bytes() -> None:
    key = new_key()
    raw = public_bytes(key)
    pem = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    assert read_public_key(pem) == read_public_key(raw.hex().encode() + b"\n") == read_public_key(raw) == raw
    with pytest.raises(ValueError):
        read_public_key(b"not a key")


@pytest.mark.parametrize("name", ["", "Agent", "../x", "a/b", "-x", "a" * 64, "a.b"])
def test_bad_names_are_refused(name: str) -> None:
    with pytest.raises(ValueError):
        check_name("agent", name)


def test_the_keyring_signs_with_the_newest_key_and_keeps_it_private(tmp_path: Path) -> None:
    ring = AgentKeyring(tmp_path)
    old, new = new_key(), new_key()
    old_id, old_path = ring.store("billing", "acme", ["invoices:read"], old)
    new_id, _ = ring.store("billing", "acme", ["invoices:read"], new)
    os.utime(old_path, ns=(1, 1))
    signer = ring.signer("billing")
    assert (signer.agent_id, signer.tenant_id, signer.scopes, signer.key_id) == (
        "billing",
        "acme",
        ("invoices:read",),
        new_id,
    )
    assert verify(signer.sign(proposal("invoice.fetch", "{}")), PublicKey(public_bytes(new)))
    assert old_path.stat().st_mode & 0o077 == 0
    ring.forget("billing", new_id)
    assert ring.signer("billing").key_id == old_id
    ring.forget("billing")
    assert not ring.has("billing")
    with pytest.raises(KeyError):
        ring.signer("billing")
    with pytest.raises(KeyError):
        AgentKeyring(tmp_path).signer("nobody")


def test_tenant_topics_are_named_and_parsed() -> None:
    topics = Topics("p.")
    assert topics.name("observations", "acme") == "p.tool.observations.acme"
    assert topics.tenant_topics("acme") == ["p.tool.approvals.requested.acme", "p.tool.observations.acme"]
    assert topics.parse("p.tool.observations.acme") == ("observations", "acme")
    assert topics.parse("p.tool.approvals.requested.globex") == ("approvals_requested", "globex")
    assert topics.parse("p.tool.approvals.decisions") == ("approvals_decisions", None)
    assert topics.parse("p.tool.executable") == ("executable", None)
    assert topics.parse("tool.executable") == ("", None)
    assert topics.parse("p.tool.observations.") == ("", None)
    with pytest.raises(KeyError):
        topics.name("observations")
    with pytest.raises(KeyError):
        topics.name("proposals", "acme")
