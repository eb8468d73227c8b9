"""The topics, the wire format and the signatures are usable from outside toolgate.

A producer written with kafka-python (pure Python, no librdkafka) and the Apache `avro` package
(a second Avro implementation) publishes a burst of proposals using only the .avsc files, signed
with a key whose private half never reaches toolgate (registered with `agents add
--public-key`): the signing document is built from its documented fields, made canonical by the
`rfc8785` package and signed with `cryptography`'s Ed25519, half of the burst each alone, half
together under one Merkle root (`toolgate/trust/merkle.py`'s layout, built here by hand). It
reads the observations back from its tenant's topic, checks the deployment's signature from the
documented layout (over the record alone, or over the root its `toolgate-proof` path leads to
when the record was signed together with others), and decodes them from the fingerprint in their
header. kafka-python has no lz4 codec here (the `lz4` package is not installed): an observation
written compressed, as the topics only toolgate reads are (topics/catalog.py), could not be
read.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import time
import uuid
from pathlib import Path
from typing import Any

import avro.io
import avro.schema
import rfc8785
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from fastavro.schema import expand_schema, load_schema
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from ..conftest import Pipeline

AVRO_DIR = Path(__file__).resolve().parents[2] / "schemas" / "avro"


def apache_schema(name: str) -> avro.schema.Schema:
    expanded = expand_schema(load_schema(str(AVRO_DIR / f"toolgate.{name}.avsc")))
    return avro.schema.parse(json.dumps(_public(expanded)))


def _public(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _public(v) for k, v in value.items() if not k.startswith("__")}
    if isinstance(value, list):
        return [_public(v) for v in value]
    return value


def _register_foreign_agent(pipeline: Pipeline, tmp_path: Path) -> tuple[str, Ed25519PrivateKey, str]:
    """A key pair made on the agent's side; toolgate only ever sees the public key file."""
    key = Ed25519PrivateKey.generate()
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    (tmp_path / "agent.pub").write_bytes(public_pem)
    agent = f"foreign-{uuid.uuid4().hex[:8]}"
    added = pipeline.cli(
        "agents",
        "add",
        agent,
        "--tenant",
        "acme",
        "--scopes",
        "invoices:read",
        "--public-key",
        str(tmp_path / "agent.pub"),
    )
    assert added.returncode == 0, added.stderr
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return agent, key, "k_" + hashlib.sha256(raw).hexdigest()[:16]


def _length_prefixed(*fields: bytes) -> bytes:
    return b"".join(len(f).to_bytes(4, "big") + f for f in fields)


def _edge_signed(topic: str, key: bytes, call_id: bytes, digest: bytes, value: bytes, proof: bytes | None) -> bytes:
    """What the deployment signed, by the documented layout: the record's fields, or, for a
    record signed together with others (a `toolgate-proof` header), the root its path leads to."""
    signed = _length_prefixed(b"toolgate.edge.v1", topic.encode(), key, call_id, digest, hashlib.sha256(value).digest())
    if proof is None:
        return signed
    node = hashlib.sha256(b"\x00" + signed).digest()
    for at in range(0, len(proof), 33):
        side, sibling = proof[at : at + 1], proof[at + 1 : at + 33]
        pair = sibling + node if side == b"L" else node + sibling
        node = hashlib.sha256(b"\x01" + pair).digest()
    return _length_prefixed(b"toolgate.edge.root.v1", node)


BURST = 40  # proposals in one produce: some reach normalization in one round, signed together


def _proposal(agent: str, key_id: str, call_id: str, run_id: str) -> tuple[dict[str, Any], bytes, bytes]:
    """A ToolProposal by the .avsc alone, unsigned; the bytes its signature covers (the RFC 8785
    signing document); and the digest toolgate will name it by."""
    arguments = '{"invoice_id": "inv_acme0002"}'
    record = {
        "call_id": call_id,
        "tenant_id": "acme",
        "principal": {"user_id": "foreign", "agent_id": agent, "scopes": ["invoices:read"]},
        "workflow_id": run_id,
        "run_id": run_id,
        "logical_operation_id": f"op-{call_id}",
        "tool_name": "invoice.fetch",
        "tool_version": "1.x",
        "arguments": arguments,
        "idempotency_key": None,
        "deadline_ms": None,
        "repair_attempt": 0,
        "dry_run": False,
        "created_at_ms": int(time.time() * 1000),
        "compensation_of": None,
        "key_id": key_id,
    }
    document = {
        "purpose": "toolgate.proposal.v1",
        **{k: v for k, v in record.items() if k != "arguments"},
        "arguments_sha256": hashlib.sha256(arguments.encode()).hexdigest(),
    }
    content = {k: v for k, v in document.items() if k not in ("created_at_ms", "key_id")}
    digest = b"sha256:" + hashlib.sha256(rfc8785.dumps(content)).hexdigest().encode()
    return record, rfc8785.dumps(document), digest


def _tree(leaves: list[bytes]) -> tuple[bytes, list[bytes]]:
    """A Merkle root over leaf hashes and each leaf's path to it, by the documented layout."""
    proofs = [b""] * len(leaves)
    level = [(leaf, [at]) for at, leaf in enumerate(leaves)]
    while len(level) > 1:
        above = []
        for (left, lefts), (right, rights) in zip(level[::2], level[1::2], strict=False):
            for at in lefts:
                proofs[at] += b"R" + right
            for at in rights:
                proofs[at] += b"L" + left
            above.append((hashlib.sha256(b"\x01" + left + right).digest(), lefts + rights))
        level = above + level[len(above) * 2 :]  # a last node without a sibling rises unchanged
    return level[0][0], proofs


def _signed(records: list[tuple[dict[str, Any], bytes]], key: Ed25519PrivateKey, together: bool) -> list[bytes]:
    """The records signed each alone, or together under one root (the root's purpose
    `toolgate.proposal.root.v1`, each with its path), Avro-encoded by the .avsc alone."""
    if together:
        root, proofs = _tree([hashlib.sha256(b"\x00" + document).digest() for _, document in records])
        signature = key.sign(_length_prefixed(b"toolgate.proposal.root.v1", root))
        for (record, _), proof in zip(records, proofs, strict=True):
            record.update(signature=signature, signature_proof=proof)
    else:
        for record, document in records:
            record["signature"] = key.sign(document)
    schema = apache_schema("ToolProposal")
    values = []
    for record, _ in records:
        body = io.BytesIO()
        avro.io.DatumWriter(schema).write(record, avro.io.BinaryEncoder(body))
        values.append(b"\xc3\x01" + schema.fingerprint("CRC-64-AVRO") + body.getvalue())
    return values


def test_a_foreign_client_proposes_and_reads_its_observation(pipeline: Pipeline, tmp_path: Path) -> None:
    assert importlib.util.find_spec("lz4") is None, "the client must lack lz4 to show observations are plain"
    agent, signing_key, key_id = _register_foreign_agent(pipeline, tmp_path)
    observation_schema = apache_schema("Observation")
    run_id = f"run_{uuid.uuid4().hex[:10]}"
    digests = {f"call_{uuid.uuid4().hex}".encode(): b"" for _ in range(BURST)}
    observations = "tool.observations.acme"
    bootstrap = pipeline.runtime["kafka_bootstrap"]
    deployment = Ed25519PublicKey.from_public_bytes(bytes.fromhex(pipeline.runtime["deployment_public_key"]))
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=1000)
    partitions = [TopicPartition(observations, p) for p in consumer.partitions_for_topic(observations)]
    consumer.assign(partitions)
    consumer.seek_to_end()
    ends = {tp: consumer.position(tp) for tp in partitions}
    for tp, offset in ends.items():
        consumer.seek(tp, offset)
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=50)
    records = []
    for call_id in digests:
        record, document, digests[call_id] = _proposal(agent, key_id, call_id.decode(), run_id)
        records.append((record, document))
    # The first half signed each alone, the second together under one root.
    values = _signed(records[: BURST // 2], signing_key, False) + _signed(records[BURST // 2 :], signing_key, True)
    for call_id, value in zip(digests, values, strict=True):
        producer.send("tool.proposals", key=run_id.encode(), value=value, headers=[("call_id", call_id)])
    producer.flush(30)
    producer.close()
    decoded: dict[bytes, dict[str, Any]] = {}
    proven = 0
    deadline = time.monotonic() + 45
    while len(decoded) < BURST and time.monotonic() < deadline:
        for message in consumer:
            headers = dict(message.headers)
            call_id = headers.get("call_id", b"")
            if call_id not in digests:
                continue
            assert message.key == run_id.encode()
            assert headers["toolgate-proposal"] == digests[call_id]
            proof = headers.get("toolgate-proof")
            proven += proof is not None
            signed = _edge_signed(observations, message.key, call_id, digests[call_id], message.value, proof)
            deployment.verify(headers["toolgate-signature"], signed)  # raises unless toolgate wrote it
            assert message.value[:2] == b"\xc3\x01"
            assert message.value[2:10] == observation_schema.fingerprint("CRC-64-AVRO")
            reader = avro.io.DatumReader(observation_schema)
            decoded[call_id] = reader.read(avro.io.BinaryDecoder(io.BytesIO(message.value[10:])))
    consumer.close()
    assert len(decoded) == BURST, f"{BURST - len(decoded)} observations did not arrive"
    assert proven, "no observation of the burst was signed together with another"
    for call_id, observation in decoded.items():
        assert observation["status"]["taxonomy_class"] == "SUCCESS"
        assert observation["tool_identity"] == {
            "name": "invoice.fetch",
            "version": "1.0.0",
            "call_id": call_id.decode(),
        }
        assert json.loads(observation["result_payload"]["data"])["invoice_id"] == "inv_acme0002"
