"""Stage MACs and the deployment's signature: derived from one secret, sealed where records leave."""

from __future__ import annotations

import pytest

from toolgate.integrity import MAC_HEADER, SIGNATURE_HEADER, DeploymentKeys, EdgeVerifier, Sealer, raw_header
from toolgate.topics.catalog import Topics
from toolgate.topics.headers import CALL_ID, PROPOSAL_DIGEST

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
