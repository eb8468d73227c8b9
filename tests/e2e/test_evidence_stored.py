"""What proved a call is kept (issue 53, part 1; migration 0036), through the running `toolgate up`:
an approved charge leaves in Postgres the agent's signed document (toolgate.calls), each counted
approver's signed decision (toolgate.approval_decisions) and every observation as it was published
(toolgate.observations), and each verifies, read back, under public keys alone: the agent's, the
approvers', the deployment's. A withdrawal is kept as its agent signed it."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from toolgate.client.withdrawals import withdraw
from toolgate.schemas.codec import codec
from toolgate.schemas.models import Observation
from toolgate.topics.headers import CALL_ID, PROPOSAL_DIGEST, header
from toolgate.trust.ed25519 import PublicKey
from toolgate.trust.integrity import EdgeVerifier
from toolgate.trust.merkle import leaf_hash, root_of, signed_root
from toolgate.trust.proposal_signing import ROOT_PURPOSE
from toolgate.trust.signing import withdrawer

from ..conftest import Pipeline
from .test_approve_with_edit import edited_ticket
from .test_gates import packet_of
from .test_pipeline import _approval_of, taxonomy

pytestmark = pytest.mark.timeout(240)
INDEPENDENT = Path(__file__).resolve().parents[2] / "verifier" / "toolgate_evidence"

PROPOSAL = """
SELECT c.signed_document, c.signature, c.signature_proof, c.arguments, k.public_key
FROM toolgate.calls c
JOIN toolgate.agent_keys k ON k.agent_id = c.agent_id
 AND k.key_id = convert_from(c.signed_document, 'UTF8')::jsonb->>'key_id'
WHERE c.tenant_id = %s AND c.call_id = %s
"""
DECISIONS = """
SELECT d.approver_id, d.signed, d.signature, p.public_key
FROM toolgate.approval_decisions d JOIN toolgate.approvers p USING (approver_id)
WHERE d.approval_id = %s ORDER BY d.approver_id
"""
OBSERVATIONS = "SELECT topic, key, value, headers FROM toolgate.observations WHERE tenant_id = %s AND call_id = %s"


def _proposal_proven(pipeline: Pipeline, tenant: str, call_id: str, arguments: dict[str, Any]) -> None:
    [(document, signature, proof, text, public_key)] = pipeline.sql(PROPOSAL, (tenant, call_id))
    key = PublicKey(bytes(public_key))
    if proof is None:
        assert key.ok(bytes(signature), bytes(document))
    else:
        root = root_of(leaf_hash(bytes(document)), bytes(proof))
        assert root is not None and key.ok(bytes(signature), signed_root(ROOT_PURPOSE, root))
    signed = json.loads(bytes(document))
    assert (signed["tenant_id"], signed["call_id"]) == (tenant, call_id)
    assert hashlib.sha256(text.encode()).hexdigest() == signed["arguments_sha256"]
    assert json.loads(text) == arguments


def _observations_proven(pipeline: Pipeline, tenant: str, call_id: str, digest: str) -> list[Observation]:
    """Every stored observation of the call, each verified as a client verifies what it reads."""
    verifier = EdgeVerifier(bytes.fromhex(pipeline.runtime["deployment_public_key"]))
    found = []
    for topic, key, value, headers in pipeline.sql(OBSERVATIONS, (tenant, call_id)):
        pairs = [(name, None if coded is None else base64.b64decode(coded)) for name, coded in headers]
        assert verifier.ok(topic, None if key is None else bytes(key), pairs, bytes(value)), topic
        assert (header(pairs, CALL_ID), header(pairs, PROPOSAL_DIGEST)) == (call_id, digest)
        found.append(codec().decode(bytes(value), Observation))
    return found


def test_an_approved_charge_leaves_its_proposal_decisions_and_observations_stored(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    invoice = pipeline.open_invoice()
    arguments = {"invoice_id": invoice, "amount_cents": 125000, "currency": "USD"}
    sent = pipeline.propose("payment.charge_card", arguments, idempotency_key=f"charge-{uuid.uuid4().hex}")
    approval_id = _approval_of(pipeline, sent)
    for approver in ("alice", "bob"):
        assert pipeline.cli("approvals", "approve", approval_id, "--as", approver).returncode == 0
    assert taxonomy(pipeline.wait(sent)) == "SUCCESS"

    _proposal_proven(pipeline, sent.tenant_id, sent.call_id, arguments)

    packet = packet_of(pipeline, approval_id)
    decided = pipeline.sql(DECISIONS, (approval_id,))
    assert [row[0] for row in decided] == ["alice", "bob"]
    for _, signed, signature, public_key in decided:
        assert PublicKey(bytes(public_key)).ok(bytes(signature), bytes(signed))
        document = json.loads(bytes(signed))
        assert (document["approval_id"], document["payload_hash"], document["state_version"]) == (
            approval_id,
            packet.payload_hash,
            packet.state_version,
        )

    # Stored before it was sent: the final one the agent read is there already.
    seen = _observations_proven(pipeline, sent.tenant_id, sent.call_id, sent.proposal_digest)
    codes = sorted(o.status.code for o in seen)
    assert 202 in codes and 200 in codes, codes

    # The bundle made of them passes `toolgate evidence verify`'s checks of what was stored.
    shown = pipeline.cli("evidence", sent.call_id, "--tenant", sent.tenant_id, "--wait", "60", timeout=120)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    bundle = tmp_path / "bundle.json"
    bundle.write_text(shown.stdout)
    verified = pipeline.cli("evidence", "verify", str(bundle), "--json", timeout=120)
    checks = {c["name"]: c["status"] for c in json.loads(verified.stdout)["checks"]}
    stored = ("proposal.signature", "proposal.arguments", "approval.signatures", "observation.signature")
    assert {name: checks.get(name) for name in stored} == dict.fromkeys(stored, "ok"), verified.stdout


def test_a_withdrawal_is_kept_as_its_agent_signed_it(pipeline: Pipeline) -> None:
    email = {"to": "ap@acme.example", "subject": "Never mind", "body": "Withdrawn before anyone decides."}
    sent = pipeline.propose("notify.send_email", email, idempotency_key=f"mail-{uuid.uuid4().hex[:8]}")
    approval_id = _approval_of(pipeline, sent)
    withdraw(pipeline.client, packet_of(pipeline, approval_id), "cli", "changed my mind")
    assert taxonomy(pipeline.wait(sent)) != "SUCCESS"
    [(signed, signature)] = pipeline.sql(
        "SELECT signed, signature FROM toolgate.approval_decisions WHERE approval_id = %s AND approver_id = %s",
        (approval_id, withdrawer("cli")),
    )
    keys = pipeline.sql("SELECT public_key FROM toolgate.agent_keys WHERE agent_id = 'cli' AND status = 'active'")
    assert any(PublicKey(bytes(k)).ok(bytes(signature), bytes(signed)) for (k,) in keys)
    assert json.loads(bytes(signed))["approval_id"] == approval_id
    seen = _observations_proven(pipeline, sent.tenant_id, sent.call_id, sent.proposal_digest)
    assert len(seen) >= 2  # the wait for approval, and the end the withdrawal gave the call


def test_an_edited_call_is_proven_by_the_agents_document_and_the_editors_signed_edit(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    """The calls row stays the agent's original; the edit is proven by the editor's signed decision
    on the held ticket; the editor's vote counted on the edited call's own ticket is signed by
    nobody (NULLs), bob's approval of it is kept as signed."""
    invoice = pipeline.open_invoice()
    arguments = {"invoice_id": invoice, "amount_cents": 125000, "currency": "USD"}
    sent = pipeline.propose("payment.charge_card", arguments, idempotency_key=f"charge-{uuid.uuid4().hex}")
    held = _approval_of(pipeline, sent)
    # Credited down while the charge waited: the approver charges what is owed.
    pipeline.sql("UPDATE demo.invoices SET amount_cents = 100000 WHERE invoice_id = %s", (invoice,))
    edit = pipeline.cli("approvals", "approve", held, "--as", "alice", "--edit", '{"amount_cents": 100000}')
    assert edit.returncode == 0, edit.stdout + edit.stderr
    second = edited_ticket(pipeline, held)
    assert pipeline.cli("approvals", "approve", second, "--as", "bob").returncode == 0
    assert taxonomy(pipeline.wait(sent)) == "SUCCESS"

    _proposal_proven(pipeline, sent.tenant_id, sent.call_id, arguments)  # as the agent signed it
    [(approver, signed, signature, public_key)] = pipeline.sql(DECISIONS, (held,))
    assert approver == "alice" and PublicKey(bytes(public_key)).ok(bytes(signature), bytes(signed))
    assert json.loads(json.loads(bytes(signed))["edited_arguments"])["amount_cents"] == 100000
    votes = pipeline.sql(
        "SELECT approver_id, decision_id, signed IS NULL, signature IS NULL FROM toolgate.approval_decisions "
        "WHERE approval_id = %s ORDER BY approver_id",
        (second,),
    )
    assert [(a, d.endswith(".edited"), s, g) for a, d, s, g in votes] == [
        ("alice", True, True, True),
        ("bob", False, False, False),
    ]
    [(_, bob_signed, bob_signature, bob_key)] = [row for row in pipeline.sql(DECISIONS, (second,)) if row[0] == "bob"]
    assert PublicKey(bytes(bob_key)).ok(bytes(bob_signature), bytes(bob_signed))
    _observations_proven(pipeline, sent.tenant_id, sent.call_id, sent.proposal_digest)

    # Its bundle carries the edit, and both verifiers prove the edited arguments and count alice by it.
    shown = pipeline.cli("evidence", sent.call_id, "--tenant", sent.tenant_id, "--wait", "60", timeout=120)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    bundle = json.loads(shown.stdout)
    assert bundle["edit"]["ticket"]["approval_id"] == held and bundle["edit"]["decision"]["approver_id"] == "alice"
    assert bundle["approval"]["ticket"]["approval_id"] == second
    path = tmp_path / "edited.json"
    path.write_text(shown.stdout)
    ours = pipeline.cli("evidence", "verify", str(path), "--json", timeout=120)
    args = [sys.executable, str(INDEPENDENT), str(path), "--json"]
    theirs = subprocess.run(args, capture_output=True, text=True, check=False, timeout=120)
    for verdict in (ours.stdout, theirs.stdout):
        checks = {c["name"]: c for c in json.loads(verdict)["checks"]}
        proven = ("proposal.signature", "proposal.arguments", "call.payload_hash", "approval.signatures")
        assert {name: checks[name]["status"] for name in (*proven, "approval.quorum")} == dict.fromkeys(
            (*proven, "approval.quorum"), "ok"
        ), verdict
