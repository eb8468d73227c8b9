"""Stage MACs and the deployment's signature: derived from one secret, sealed where records leave."""

from __future__ import annotations

import pytest

from toolgate.topics.catalog import Topics
from toolgate.topics.headers import CALL_ID, PROPOSAL_DIGEST
from toolgate.trust.integrity import (
    MAC_HEADER,
    PROOF_HEADER,
    SIGNATURE_HEADER,
    DeploymentKeys,
    EdgeVerifier,
    Sealer,
    edge_signed_bytes,
    raw_header,
)
from toolgate.trust.merkle import ROOTS_KEPT, SIBLING_LEFT, SIBLING_RIGHT, STEP

KEYS = DeploymentKeys(b"a deployment secret of some length")
SEALER = Sealer(KEYS, Topics("p."))
BATCH = b"\xc3\x01 a StageBatch"


def test_a_secret_too_short_to_key_anything_is_refused() -> None:
    with pytest.raises(ValueError):
        DeploymentKeys(b"short")


def test_keys_are_derived_deterministically_and_differ_per_topic() -> None:
    again = DeploymentKeys(b"a deployment secret of some length")
    assert again.mac("p.tool.executable", BATCH) == KEYS.mac("p.tool.executable", BATCH)
    assert again.public_key == KEYS.public_key and len(KEYS.public_key) == 32
    assert KEYS.mac("p.tool.validated", BATCH) != KEYS.mac("p.tool.executable", BATCH)
    assert DeploymentKeys(b"another deployment's secret!!").mac("p.tool.executable", BATCH) != KEYS.mac(
        "p.tool.executable", BATCH
    )


@pytest.mark.parametrize(
    "logical", ["validated", "authorized", "executable", "results", "deadletter"], ids=lambda name: name
)
def test_internal_topics_and_dead_letters_are_sealed_with_a_mac(logical: str) -> None:
    topic = Topics("p.").name(logical)
    headers = SEALER.seal(topic, None, BATCH, [("toolgate-stage", b"policy")])
    assert raw_header(headers, MAC_HEADER) == KEYS.mac(topic, BATCH)
    assert SEALER.mac_ok(topic, BATCH, headers)
    assert not SEALER.mac_ok(topic, BATCH + b"x", headers)
    assert not SEALER.mac_ok(topic, BATCH, [])


def test_a_genuine_batch_of_one_topic_is_a_forgery_on_another() -> None:
    validated, executable = Topics("p.").name("validated"), Topics("p.").name("executable")
    headers = SEALER.seal(validated, None, BATCH, [])
    assert not SEALER.mac_ok(executable, BATCH, headers)


def test_a_seal_replaces_whatever_mac_or_signature_came_in() -> None:
    topic = Topics("p.").name("executable")
    headers = SEALER.seal(topic, None, BATCH, [(MAC_HEADER, b"forged"), (SIGNATURE_HEADER, b"forged")])
    assert [k for k, _ in headers].count(MAC_HEADER) == 1 and raw_header(headers, SIGNATURE_HEADER) is None


def test_proposals_and_decisions_are_not_sealed_they_are_signed_by_their_authors() -> None:
    for logical in ("proposals", "approvals_decisions"):
        assert SEALER.seal(Topics("p.").name(logical), b"k", BATCH, []) == []


def edge(tenant: str = "acme") -> tuple[str, bytes, list[tuple[str, bytes]], bytes]:
    topic = Topics("p.").name("observations", tenant)
    headers = [(CALL_ID, b"call_1"), (PROPOSAL_DIGEST, b"sha256:ab")]
    value = b"\xc3\x01 an Observation"
    return topic, b"run_1", SEALER.seal(topic, b"run_1", value, headers), value


def test_observations_are_signed_and_clients_verify_them() -> None:
    topic, key, headers, value = edge()
    verifier = EdgeVerifier(KEYS.public_key)
    assert raw_header(headers, SIGNATURE_HEADER) is not None
    assert verifier.ok(topic, key, headers, value)


@pytest.mark.parametrize("change", ["value", "key", "topic", "call_id", "digest", "unsigned", "other deployment"])
def test_any_change_to_a_signed_observation_is_detected(change: str) -> None:
    topic, key, headers, value = edge()
    verifier = EdgeVerifier(KEYS.public_key)
    if change == "value":
        value += b"!"
    elif change == "key":
        key = b"run_2"
    elif change == "topic":
        topic = Topics("p.").name("observations", "globex")
    elif change == "call_id":
        headers = [(CALL_ID, b"call_2") if k == CALL_ID else (k, v) for k, v in headers]
    elif change == "digest":
        headers = [(PROPOSAL_DIGEST, b"sha256:cd") if k == PROPOSAL_DIGEST else (k, v) for k, v in headers]
    elif change == "unsigned":
        headers = [(k, v) for k, v in headers if k != SIGNATURE_HEADER]
    else:
        verifier = EdgeVerifier(DeploymentKeys(b"another deployment's secret!!").public_key)
    assert not verifier.ok(topic, key, headers, value)


def edges(count: int, tenant: str = "acme") -> list[tuple[str, bytes, list[tuple[str, bytes]], bytes]]:
    """`count` observations sealed together, as a stage's flush seals a round's records."""
    topic = Topics("p.").name("observations", tenant)
    records = [
        (topic, f"run_{i}".encode(), [(CALL_ID, f"call_{i}".encode()), (PROPOSAL_DIGEST, b"sha256:ab")], b"obs %d" % i)
        for i in range(count)
    ]
    sealed = SEALER.seal_all([(t, k, v, h) for t, k, h, v in records])
    return [(t, k, h, v) for (t, k, _, v), h in zip(records, sealed, strict=True)]


@pytest.mark.parametrize("count", [2, 3, 4, 5, 7, 8, 9, 31, 500])
def test_records_sealed_together_share_one_signature_and_each_proves_its_place(count: int) -> None:
    records = edges(count)
    verifier = EdgeVerifier(KEYS.public_key)
    assert all(verifier.ok(*record) for record in records)
    assert len({raw_header(h, SIGNATURE_HEADER) for _, _, h, _ in records}) == 1
    assert max(len(raw_header(h, PROOF_HEADER) or b"") for _, _, h, _ in records) <= STEP * (count - 1).bit_length()
    # A client that saw none of the round checks any one of them alone.
    assert all(EdgeVerifier(KEYS.public_key).ok(*record) for record in records)


def test_one_record_alone_is_signed_over_its_own_bytes_without_a_proof() -> None:
    (record,) = edges(1)
    topic, key, headers, value = record
    assert raw_header(headers, PROOF_HEADER) is None
    assert KEYS.signing_key.public.ok(
        raw_header(headers, SIGNATURE_HEADER), edge_signed_bytes(topic, key, headers, value)
    )


def test_trees_never_mix_topics() -> None:
    acme, globex = Topics("p.").name("observations", "acme"), Topics("p.").name("observations", "globex")
    sealed = SEALER.seal_all(
        [(t, b"k", b"v%d" % i, [(CALL_ID, b"c%d" % i)]) for i, t in enumerate([acme, globex, acme])]
    )
    assert raw_header(sealed[1], PROOF_HEADER) is None
    assert raw_header(sealed[0], SIGNATURE_HEADER) == raw_header(sealed[2], SIGNATURE_HEADER)
    assert raw_header(sealed[0], SIGNATURE_HEADER) != raw_header(sealed[1], SIGNATURE_HEADER)


@pytest.mark.parametrize(
    "change", ["value", "call_id", "proof of another record", "sibling", "side", "truncated", "not steps", "unsigned"]
)
def test_a_record_of_a_signed_tree_is_detected_when_anything_changes(change: str) -> None:
    records = edges(5)
    topic, key, headers, value = records[2]
    proof = raw_header(headers, PROOF_HEADER) or b""
    others = raw_header(records[3][2], PROOF_HEADER) or b""
    forged = {
        "proof of another record": others,
        "sibling": proof[:5] + bytes([proof[5] ^ 1]) + proof[6:],
        "side": (SIBLING_RIGHT if proof[:1] == SIBLING_LEFT else SIBLING_LEFT) + proof[1:],
        "truncated": proof[:STEP],
        "not steps": proof + b"L",
    }
    if change == "value":
        value += b"!"
    elif change == "call_id":
        headers = [(CALL_ID, b"call_9") if k == CALL_ID else (k, v) for k, v in headers]
    elif change == "unsigned":
        headers = [(k, v) for k, v in headers if k != SIGNATURE_HEADER]
    else:
        headers = [(PROOF_HEADER, forged[change]) if k == PROOF_HEADER else (k, v) for k, v in headers]
    verifier = EdgeVerifier(KEYS.public_key)
    assert verifier.ok(*records[0])  # the root is known and checked: it vouches only for its own leaves
    assert not verifier.ok(topic, key, headers, value)


def test_a_known_root_under_another_signature_is_checked_again() -> None:
    records = edges(3)
    verifier = EdgeVerifier(KEYS.public_key)
    assert verifier.ok(*records[0])
    topic, key, headers, value = records[1]
    forged = [(SIGNATURE_HEADER, bytes(64)) if k == SIGNATURE_HEADER else (k, v) for k, v in headers]
    assert not verifier.ok(topic, key, forged, value)
    assert verifier.ok(topic, key, headers, value)


def test_a_root_signature_cannot_pass_for_a_record_signature() -> None:
    """A record alone is signed over its edge bytes, a tree over its root under another purpose:
    a root's signature, moved onto a record without its proof, verifies nothing."""
    records = edges(2)
    topic, key, headers, value = records[0]
    bare = [(k, v) for k, v in headers if k != PROOF_HEADER]
    assert not EdgeVerifier(KEYS.public_key).ok(topic, key, bare, value)


def test_another_deployments_tree_is_refused() -> None:
    records = edges(4)
    assert not any(EdgeVerifier(DeploymentKeys(b"another deployment's secret!!").public_key).ok(*r) for r in records)


def test_a_verifier_remembers_a_bounded_number_of_roots_and_checks_forgotten_ones_again() -> None:
    verifier = EdgeVerifier(KEYS.public_key)
    rounds = [edges(2, tenant=f"t{i}") for i in range(ROOTS_KEPT + 10)]
    assert all(verifier.ok(*records[0]) for records in rounds)
    assert len(verifier._roots) <= ROOTS_KEPT
    assert all(verifier.ok(*records[1]) for records in rounds)


def test_the_keys_a_stage_prepares_as_it_starts_are_those_it_would_derive() -> None:
    keys = DeploymentKeys(b"a deployment secret of some length")
    sealer = Sealer(keys, Topics("p."))
    sealer.prepare(["p.tool.validated", "p.tool.deadletter", "p.tool.proposals", "__consumer_offsets", "other"])
    # MACed topics only (proposals are signed by their agents, the rest is not the deployment's).
    assert sorted(keys._mac_keys) == ["p.tool.deadletter", "p.tool.validated"]
    # (the signing key is derived either way: the key's id, which every MAC names, is its public key's)
    assert keys.mac("p.tool.validated", BATCH) == KEYS.mac("p.tool.validated", BATCH)
    sealer.prepare(["p.tool.observations.acme"])
    assert vars(keys)["signing_key"].public.raw == KEYS.public_key
