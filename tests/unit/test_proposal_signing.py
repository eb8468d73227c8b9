"""Proposal signatures: every field that decides what runs is signed; the digest names the content."""

from __future__ import annotations

from typing import Any

import pytest
import rfc8785
from hypothesis import given
from hypothesis import strategies as st

from tests.unit.factories import FAST, principal, proposal
from toolgate.schemas.models import Principal
from toolgate.trust.ed25519 import PrivateKey
from toolgate.trust.merkle import STEP, CheckedRoots, leaf_hash, signed_root
from toolgate.trust.proposal_signing import (
    ROOT_PURPOSE,
    arguments_sha256,
    digest,
    sign,
    sign_all,
    signed_bytes,
    signed_with_digest,
    signing_document,
    verified_digest,
    verify,
)
from toolgate.trust.signing import new_key


def new_signing_key() -> PrivateKey:
    return PrivateKey.of(new_key())


KEY = new_signing_key()
SIGNED = sign(proposal("invoice.fetch", {"invoice_id": "inv_acme0001"}), "k_1", KEY)

# What an attacker who cannot sign would like to change, field by field.
TAMPERED: list[tuple[str, dict[str, Any]]] = [
    ("call_id", {"call_id": "call_2"}),
    ("tenant_id", {"tenant_id": "globex"}),
    ("user", {"principal": principal().model_copy(update={"user_id": "someone"})}),
    ("agent", {"principal": principal().model_copy(update={"agent_id": "agent_2"})}),
    ("scopes", {"principal": Principal(user_id="user_1", agent_id="agent_1", scopes=["payments:charge"])}),
    ("workflow_id", {"workflow_id": "wf_2"}),
    ("run_id", {"run_id": "run_2"}),
    ("logical_operation_id", {"logical_operation_id": "op_2"}),
    ("tool_name", {"tool_name": "payment.charge_card"}),
    ("tool_version", {"tool_version": "0.9.0"}),
    ("arguments", {"arguments": '{"invoice_id": "inv_globex0001"}'}),
    ("arguments whitespace", {"arguments": '{"invoice_id":"inv_acme0001"}'}),
    ("idempotency_key", {"idempotency_key": "k"}),
    ("deadline_ms", {"deadline_ms": 1}),
    ("repair_attempt", {"repair_attempt": 1}),
    ("dry_run", {"dry_run": True}),
    ("created_at_ms", {"created_at_ms": 1}),
    ("compensation_of", {"compensation_of": "call_0"}),
    ("key_id", {"key_id": "k_2"}),
]


def test_a_signed_proposal_verifies_with_its_key_only() -> None:
    assert verify(SIGNED, KEY.public)
    assert not verify(SIGNED, new_signing_key().public)


@pytest.mark.parametrize(("field", "change"), TAMPERED, ids=[f for f, _ in TAMPERED])
def test_changing_any_signed_field_breaks_the_signature(field: str, change: dict[str, Any]) -> None:
    assert not verify(SIGNED.model_copy(update=change), KEY.public)
    assert verified_digest(SIGNED.model_copy(update=change), KEY.public) is None


def test_a_verified_digest_is_the_digest_of_a_proposal_its_key_signed_and_nothing_else() -> None:
    assert verified_digest(SIGNED, KEY.public) == digest(SIGNED)
    assert verified_digest(SIGNED, new_signing_key().public) is None
    assert verified_digest(SIGNED.model_copy(update={"signature": None}), KEY.public) is None
    assert verified_digest(SIGNED.model_copy(update={"signature": b""}), KEY.public) is None
    assert verified_digest(SIGNED.model_copy(update={"created_at_ms": 2**60}), KEY.public) is None


def test_signed_with_digest_is_sign_and_the_digest_of_what_was_signed() -> None:
    unsigned = proposal("invoice.fetch", {"invoice_id": "inv_acme0001"})
    signed, signed_digest = signed_with_digest(unsigned, "k_1", KEY)
    assert signed == SIGNED  # Ed25519 signatures are deterministic
    assert signed_digest == digest(SIGNED) == verified_digest(signed, KEY.public)


def test_unsigned_and_empty_signatures_do_not_verify() -> None:
    assert not verify(SIGNED.model_copy(update={"signature": None}), KEY.public)
    assert not verify(SIGNED.model_copy(update={"signature": b""}), KEY.public)
    assert not verify(SIGNED.model_copy(update={"signature": b"\x00" * 64}), KEY.public)


def test_a_field_canonical_json_cannot_hold_fails_verification_instead_of_raising() -> None:
    huge = SIGNED.model_copy(update={"deadline_ms": 2**60})
    assert not verify(huge, KEY.public)


def test_the_signing_document_is_canonical_json_of_documented_fields() -> None:
    document = signing_document(SIGNED)
    assert set(document) == {
        "purpose",
        "call_id",
        "tenant_id",
        "principal",
        "workflow_id",
        "run_id",
        "logical_operation_id",
        "tool_name",
        "tool_version",
        "arguments_sha256",
        "idempotency_key",
        "deadline_ms",
        "repair_attempt",
        "dry_run",
        "compensation_of",
        "created_at_ms",
        "key_id",
    }
    assert document["purpose"] == "toolgate.proposal.v1"
    assert document["arguments_sha256"] == arguments_sha256(SIGNED.arguments)
    assert signed_bytes(SIGNED) == rfc8785.dumps(document)


def test_the_digest_names_the_content_not_when_or_with_which_key() -> None:
    again = sign(SIGNED.model_copy(update={"created_at_ms": 5}), "k_other", new_signing_key())
    assert digest(again) == digest(SIGNED)
    assert digest(SIGNED.model_copy(update={"arguments": "{}"})) != digest(SIGNED)
    assert digest(SIGNED.model_copy(update={"tenant_id": "globex"})) != digest(SIGNED)
    assert digest(SIGNED).startswith("sha256:") and len(digest(SIGNED)) == 7 + 64


@FAST
@given(st.text(max_size=200), st.text(max_size=40))
def test_any_arguments_and_ids_sign_and_verify(arguments: str, call_id: str) -> None:
    signed = sign(proposal("invoice.fetch", arguments, call_id=call_id), "k_1", KEY)
    assert verify(signed, KEY.public)


FIELD_TEXT = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=30)


@FAST
@given(
    FIELD_TEXT, FIELD_TEXT, st.lists(FIELD_TEXT, max_size=3), st.one_of(st.none(), st.integers(-(2**53) + 1, 2**53 - 1))
)
def test_the_signed_bytes_are_exactly_rfc8785(call_id: str, user: str, scopes: list[str], deadline: int | None) -> None:
    p = proposal(
        "invoice.fetch",
        "{}",
        call_id=call_id,
        principal=Principal(user_id=user, agent_id="a", scopes=scopes),
        deadline_ms=deadline,
        idempotency_key=user or None,
    )
    assert signed_bytes(p) == rfc8785.dumps(signing_document(p))


def test_a_lone_surrogate_cannot_be_signed() -> None:
    with pytest.raises(ValueError):
        signed_bytes(proposal("invoice.fetch", "{}", call_id="\ud800"))


# Proposals an agent publishes together, signed once under the root of their tree.
BATCH = [proposal("invoice.fetch", {"invoice_id": f"inv_acme{i:04}"}, call_id=f"call_{i}") for i in range(5)]
TOGETHER = sign_all(BATCH, "k_1", KEY)


def test_proposals_signed_together_share_one_signature_and_each_verifies_with_its_digest() -> None:
    assert len({p.signature for p, _ in TOGETHER}) == 1
    assert all(p.signature_proof and len(p.signature_proof) <= 3 * STEP for p, _ in TOGETHER)
    roots = CheckedRoots(ROOT_PURPOSE)
    assert all(verified_digest(p, KEY.public, roots) == d == digest(p) for p, d in TOGETHER)
    assert len(roots) == 1  # the root was checked once, for all five
    assert all(verify(p, KEY.public) for p, _ in TOGETHER)  # without remembered roots too
    assert not any(verify(p, new_signing_key().public) for p, _ in TOGETHER)


def test_one_proposal_alone_is_signed_over_its_own_document_without_a_proof() -> None:
    [(alone, alone_digest)] = sign_all(BATCH[:1], "k_1", KEY)
    assert alone.signature_proof is None and alone_digest == digest(alone)
    assert alone == sign(BATCH[0], "k_1", KEY)


@pytest.mark.parametrize(("field", "change"), TAMPERED, ids=[f for f, _ in TAMPERED])
def test_changing_any_signed_field_of_a_proposal_signed_together_breaks_it(field: str, change: dict[str, Any]) -> None:
    roots = CheckedRoots(ROOT_PURPOSE)
    assert all(verified_digest(p, KEY.public, roots) for p, _ in TOGETHER)  # the root is remembered
    assert verified_digest(TOGETHER[3][0].model_copy(update=change), KEY.public, roots) is None


def test_a_proof_taken_elsewhere_or_broken_or_dropped_proves_nothing() -> None:
    first, second = TOGETHER[0][0], TOGETHER[1][0]
    proof = first.signature_proof or b""
    broken: list[bytes | None] = [
        second.signature_proof,  # another proposal's place in the tree
        proof[:STEP],  # cut short
        proof + proof[:STEP],  # one step too many
        proof[:-1],  # not made of steps
        b"X" + proof[1:],  # a side that is neither
        b"",  # as if it were alone in its tree
        None,  # the root's signature as if it were over this proposal alone
    ]
    for bad in broken:
        assert verified_digest(first.model_copy(update={"signature_proof": bad}), KEY.public) is None


def test_a_root_signed_by_one_agent_proves_nothing_for_another_agents_key() -> None:
    other = new_signing_key()
    roots = CheckedRoots(ROOT_PURPOSE)
    assert verified_digest(TOGETHER[0][0], KEY.public, roots)
    assert verified_digest(TOGETHER[1][0], other.public, roots) is None


def test_a_proposals_own_signature_cannot_pass_for_a_root_and_a_root_not_for_a_proposal() -> None:
    leaf = leaf_hash(signed_bytes(SIGNED))
    as_root = SIGNED.model_copy(update={"signature_proof": b""})  # a tree of one: its root is the leaf
    assert verified_digest(as_root, KEY.public) is None
    rooted = SIGNED.model_copy(update={"signature": KEY.sign(signed_root(ROOT_PURPOSE, leaf)), "signature_proof": b""})
    assert verified_digest(rooted, KEY.public) == digest(SIGNED)  # a tree of one, signed as a tree
    assert verified_digest(rooted.model_copy(update={"signature_proof": None}), KEY.public) is None
