"""The evidence bundle's pure pieces (docs/evidence.md): the sections made from rows, and the
audit inclusion proofs taken in one pass over the log's leaves (log_tree.InclusionPaths)."""

from __future__ import annotations

import base64
import hashlib
import json
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolgate.schemas.codec import codec
from toolgate.schemas.hashing import payload_hash
from toolgate.store.rows import Decided
from toolgate.trust import proposal_signing, signed_note
from toolgate.trust.ed25519 import PrivateKey
from toolgate.trust.log_tree import CompactRange, InclusionPaths, Known, inclusion_ok, path_spans
from toolgate.trust.tlog_checkpoint import TreeHead
from toolgate.trust.witness_keys import WitnessKey
from toolgate.workers.reconciliation import evidence_bundle as sections

from .factories import contracts, proposal, stage_record


def _leaves(n: int) -> list[bytes]:
    return [hashlib.sha256(str(i).encode()).digest() for i in range(n)]


@given(st.integers(1, 300), st.data())
def test_inclusion_paths_are_rfc6962_audit_paths_taken_in_one_pass(size: int, data: st.DataObject) -> None:
    leaves = _leaves(size)
    chosen = data.draw(st.sets(st.integers(0, size - 1), max_size=8))
    tree = InclusionPaths(size)
    for i, leaf in enumerate(leaves):
        assert tree.add(leaf, i in chosen) == i
    proofs = tree.proofs()
    root, known = CompactRange(0).extend(leaves).root(), Known(CompactRange(0), leaves)
    assert set(proofs) == chosen
    for i in chosen:
        assert proofs[i] == known.inclusion(i)
        assert inclusion_ok(leaves[i], i, size, proofs[i], root)
        assert len(proofs[i]) == len(path_spans(i, size))


@given(st.integers(1, 200), st.data())
def test_inclusion_paths_from_a_compact_range_read_only_the_leaves_after_it(size: int, data: st.DataObject) -> None:
    leaves = _leaves(size)
    start = data.draw(st.integers(0, size - 1))
    chosen = data.draw(st.sets(st.integers(start, size - 1), max_size=5))
    tree = InclusionPaths(size, CompactRange(0).extend(leaves[:start]))
    for i in range(start, size):
        assert tree.add(leaves[i], i in chosen) == i
    known = Known(CompactRange(0), leaves)
    assert tree.proofs() == {i: known.inclusion(i) for i in chosen}


def test_inclusion_paths_refuse_a_tree_of_another_size() -> None:
    tree = InclusionPaths(3)
    tree.add(b"\0" * 32, True)
    with pytest.raises(ValueError, match="3 leaves; 1 were added"):
        tree.proofs()
    tree.add(b"\1" * 32)
    tree.add(b"\2" * 32)
    with pytest.raises(ValueError, match="the tree has 3 leaves"):
        tree.add(b"\3" * 32)


def test_the_proposal_section_carries_the_stored_bytes_in_base64_and_nulls_for_rows_before_0036() -> None:
    key = PrivateKey(os.urandom(32))
    signed = proposal_signing.sign(proposal("invoice.fetch", {"invoice_id": "inv_1"}), "k1", key)
    document = proposal_signing.signed_bytes(signed)
    row = {
        "proposal_digest": proposal_signing.digest(signed),
        "agent_id": "agent_1",
        "signed_document": document,
        "signature": signed.signature,
        "signature_proof": None,
        "arguments": signed.arguments,
    }
    section = sections.proposal(row)
    assert section is not None and base64.b64decode(section["document"]) == document
    assert key.public.ok(base64.b64decode(section["signature"]), base64.b64decode(section["document"]))
    assert section["proof"] is None and section["arguments"] == '{"invoice_id": "inv_1"}'
    assert sections.signing_document(row) == json.loads(document)
    old = dict(row, signed_document=None, signature=None, arguments=None)
    assert sections.proposal(old) == {"document": None, "signature": None, "proof": None, "arguments": None}
    assert sections.signing_document(old) is None
    assert sections.proposal(None) is None


def test_the_call_is_the_policy_records_call_with_its_arguments_unredacted() -> None:
    contract = next(c for c in contracts() if c.name == "payment.charge_card")
    arguments = {"customer_id": "cus_1", "amount_cents": 1250, "currency": "USD", "card_token": "tok_secret"}
    record = stage_record(contract, arguments, payload_hash=payload_hash(arguments))
    encoded = codec().encode(record)
    decided = [
        Decided("acme", "call_1", "policy", 5, contract.name, contract.version, "c", "p", "allow", record=encoded)
    ]
    judged = sections.judged_call(decided)
    call = sections.call_section({"proposal_digest": "sha256:" + "1" * 64}, judged)
    assert call is not None and call["arguments"] == arguments
    assert call["payload_hash"] == payload_hash(arguments)
    assert call["proposal_digest"] == "sha256:" + "1" * 64
    assert call["idempotency_key"] == record.call.idempotency_key and call["request_hash"] == record.call.request_hash
    [row] = sections.decisions(decided)
    assert "tenant_id" not in row and base64.b64decode(row["record"]) == decided[0].record
    refused = sections.call_section({"proposal_digest": "sha256:d"}, None)
    assert refused == dict.fromkeys(("arguments", "payload_hash", "idempotency_key", "request_hash")) | {
        "proposal_digest": "sha256:d"
    }
    assert sections.call_section(None, None) is None


def test_keys_name_deployment_keys_by_id_and_witnesses_by_their_verifier_key() -> None:
    deployment, witness = PrivateKey(os.urandom(32)), PrivateKey(os.urandom(32))
    [entry] = sections.deployment([deployment.public.raw])
    assert entry["key_id"] == "dk_" + hashlib.sha256(deployment.public.raw).hexdigest()[:16]
    [seen] = sections.witnesses([WitnessKey("w.test/1", "http://w", witness.public)])
    assert signed_note.parse_vkey(seen["vkey"]) == ("w.test/1", signed_note.COSIGNATURE_V1, witness.public.raw)


def test_the_checkpoint_note_carries_the_witnesses_lines_and_still_verifies() -> None:
    deployment, witness = PrivateKey(os.urandom(32)), PrivateKey(os.urandom(32))
    text = TreeHead("toolgate/audit", 3, b"\7" * 32).text()
    note = str(signed_note.sign(text, "toolgate/audit", deployment))
    line = signed_note.cosign(text, "w.test/1", witness, 1_800_000_000).line()
    carried = signed_note.parse(sections.cosigned_note(note, [line]))
    assert signed_note.signed_by(carried, "toolgate/audit", deployment.public)
    assert signed_note.cosigned_at(carried, "w.test/1", witness.public) == 1_800_000_000


def test_an_audit_row_without_a_proof_is_marked_so() -> None:
    row = {"id": 7, "hash": "ab" * 32}
    assert sections.audit_row(row, 6, [b"\1" * 32]) == {**row, "leaf_index": 6, "inclusion": ["01" * 32]}
    assert sections.audit_row(row, None, None) == {**row, "leaf_index": None, "inclusion": None}


def test_approval_and_observation_sections_encode_bytes_in_base64() -> None:
    ticket = {"approval_id": "apr_1", "approver_groups": None, "payload_hash": "sha256:x"}
    decision = {"decision_id": "d1", "approver_id": "alice", "signed": b"{}", "signature": b"\1" * 64}
    section = sections.approval(ticket, [decision])
    assert section is not None and section["ticket"]["approver_groups"] == []
    assert section["decisions"][0]["signed"] == "e30=" and sections.approval(None, []) is None
    headers = [["call_id", base64.b64encode(b"call_1").decode()], ["toolgate-proof", None]]
    row = {"topic": "t", "key": None, "value": b"not a record", "headers": headers, "at": "2026-01-01T00:00:00.000000Z"}
    [seen] = sections.observations([row])
    assert seen["value"] == base64.b64encode(b"not a record").decode() and seen["key"] is None
    assert seen["headers"] == headers and seen["decoded"] is None


def test_the_edit_section_is_the_original_ticket_and_the_editors_signed_decision() -> None:
    original = {"approval_id": "apr_0", "approver_groups": ["finance"], "status": "EDITED", "edit_decision_id": "d0"}
    decision = {"decision_id": "d0", "approver_id": "alice", "signed": b"{}", "signature": b"\1" * 64}
    edit = sections.edit(original, decision)
    assert edit == {
        "ticket": {"approval_id": "apr_0", "approver_groups": ["finance"], "status": "EDITED"},
        "decision": {**decision, "signed": "e30=", "signature": base64.b64encode(b"\1" * 64).decode()},
    }
    assert sections.edit(None, None) is None and sections.edit(original, None) is None
