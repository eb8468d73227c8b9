"""`toolgate evidence CALL_ID` through `toolgate up` (issue 53, part 1): the bundle of an approved,
executed call and of a refused call, each checked with toolgate's own trust functions: the
proposal's signature, the approver's decision signature, the observation's deployment signature,
every audit row's chain hash and inclusion in the newest tree head, and the head's signature.

The stages write migration 0036's columns (evidence-persist): the proposal's document and
signature, the decision's signed bytes and every observation are in each bundle."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from toolgate.schemas.hashing import payload_hash
from toolgate.store.audit import chain_hash
from toolgate.store.audit_entry import Entry
from toolgate.trust.ed25519 import PublicKey
from toolgate.trust.integrity import EdgeVerifier
from toolgate.trust.log_tree import inclusion_ok
from toolgate.trust.merkle import leaf_hash, root_of, signed_root
from toolgate.trust.proposal_signing import ROOT_PURPOSE
from toolgate.trust.signed_note import parse, signed_by
from toolgate.trust.tlog_checkpoint import TreeHead

from ..conftest import Pipeline
from .test_pipeline import _approval_of, taxonomy

pytestmark = pytest.mark.timeout(240)


def _b(text: str) -> bytes:
    return base64.b64decode(text)


def evidence(pipeline: Pipeline, call_id: str) -> dict[str, Any]:
    shown = pipeline.cli("evidence", call_id, "--tenant", "acme", "--wait", "60", timeout=120)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    bundle: dict[str, Any] = json.loads(shown.stdout)
    assert bundle["format"] == "toolgate.evidence/v1" and bundle["call_id"] == call_id
    return bundle


def check_proposal(bundle: dict[str, Any]) -> None:
    proposal = bundle["proposal"]
    agent = PublicKey(_b(bundle["keys"]["agent"]["public_key"]))
    document, signature = _b(proposal["document"]), _b(proposal["signature"])
    if proposal["proof"] is None:
        assert agent.ok(signature, document)
    else:
        root = root_of(leaf_hash(document), _b(proposal["proof"]))
        assert root is not None and agent.ok(signature, signed_root(ROOT_PURPOSE, root))
    assert json.loads(document)["call_id"] == bundle["call_id"]


def check_observations(bundle: dict[str, Any]) -> None:
    deployment = EdgeVerifier([_b(k["public_key"]) for k in bundle["keys"]["deployment"]])
    assert bundle["observations"]  # every observation as published
    for seen in bundle["observations"]:
        headers = [(name, None if v is None else _b(v)) for name, v in seen["headers"]]
        key = None if seen["key"] is None else _b(seen["key"])
        assert deployment.ok(seen["topic"], key, headers, _b(seen["value"])), seen["topic"]


def check_audit(bundle: dict[str, Any], deployment_keys: list[bytes]) -> None:
    audit = bundle["audit"]
    checkpoint = audit["checkpoint"]
    assert audit["rows"] and audit["uncovered"] == 0 and checkpoint is not None
    root, size = bytes.fromhex(checkpoint["root_hash"]), checkpoint["tree_size"]
    for row in audit["rows"]:
        entry = Entry(row["stage"], row["action"], row["actor"], row["call_id"], row["tenant_id"], row["detail"])
        assert chain_hash(row["prev_hash"], row["at"], entry) == row["hash"]
        proof = [bytes.fromhex(h) for h in row["inclusion"]]
        assert inclusion_ok(bytes.fromhex(row["hash"]), row["leaf_index"], size, proof, root)
    note = parse(checkpoint["note"])
    head = TreeHead.parse(note.text)
    assert (head.size, head.root) == (size, root)
    [key] = [k for k in bundle["keys"]["deployment"] if k["key_id"] == checkpoint["key_id"]]
    assert _b(key["public_key"]) in deployment_keys
    assert signed_by(note, head.origin, PublicKey(_b(key["public_key"])))


VERIFIER = Path(__file__).resolve().parents[2] / "verifier" / "toolgate_evidence"
REDERIVED = "decisions.rederived"  # toolgate's own verifier only: the independent one cannot run toolgate


def _pins(deployment_keys: list[bytes]) -> list[str]:
    return [arg for key in deployment_keys for arg in ("--deployment-key", base64.b64encode(key).decode())]


def verdicts(
    pipeline: Pipeline, bundle: dict[str, Any], path: Path, keys: list[bytes]
) -> tuple[dict[str, str], dict[str, str]]:
    """Both verifiers' statuses by check on `bundle`, offline, with the deployment's keys pinned:
    toolgate's own (`toolgate evidence verify`) and the independent module, run in isolated mode."""
    path.write_text(json.dumps(bundle))
    ours = pipeline.cli("evidence", "verify", str(path), "--json", *_pins(keys))
    theirs = subprocess.run(
        [sys.executable, "-I", str(VERIFIER), str(path), "--json", *_pins(keys)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    found = []
    for run in (ours, theirs):
        assert run.returncode in (0, 1), run.stdout + run.stderr
        verdict = json.loads(run.stdout)
        statuses = {c["name"]: c["status"] for c in verdict["checks"]}
        assert verdict["ok"] == (run.returncode == 0) == ("failed" not in statuses.values())
        found.append(statuses)
    return found[0], found[1]


def failed(statuses: dict[str, str]) -> set[str]:
    return {name for name, status in statuses.items() if status == "failed"}


def _flip_b64(text: str, at: int) -> str:
    raw = bytearray(base64.b64decode(text))
    raw[at] ^= 1
    return base64.b64encode(bytes(raw)).decode()


def _root_flipped(note: str) -> str:
    origin, size, root = note.split("\n")[:3]
    return note.replace(f"{origin}\n{size}\n{root}", f"{origin}\n{size}\n{_flip_b64(root, 5)}", 1)


# A single-byte tampering of a real bundle, and the checks both verifiers must then fail.
TAMPERINGS: dict[str, tuple[Any, set[str]]] = {
    "an argument": (
        lambda b: b["call"]["arguments"].update(amount_cents=b["call"]["arguments"]["amount_cents"] + 1),
        {"call.payload_hash"},
    ),
    "a decision signature": (
        lambda b: b["approval"]["decisions"][0].update(
            signature=_flip_b64(b["approval"]["decisions"][0]["signature"], 9)
        ),
        {"approval.signatures", "approval.quorum"},
    ),
    "a state version": (
        lambda b: b["approval"]["ticket"].update(state_version=b["approval"]["ticket"]["state_version"] + "x"),
        {"approval.state_version"},
    ),
    "an audit row": (
        lambda b: b["audit"]["rows"][0].update(actor=b["audit"]["rows"][0]["actor"] + "x"),
        {"audit.rows"},
    ),
    "the observation": (
        lambda b: b["observations"][-1].update(value=_flip_b64(b["observations"][-1]["value"], 3)),
        {"observation.signature"},
    ),
    "a checkpoint": (
        lambda b: b["audit"]["checkpoint"].update(note=_root_flipped(b["audit"]["checkpoint"]["note"])),
        {"checkpoint.signature"},
    ),
}


def test_a_two_approver_charge_verifies_offline_with_both_verifiers_and_each_tampering_is_named_by_both(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    keys = [bytes.fromhex(k) for k in pipeline.runtime["deployment_public_key"].split(",")]
    invoice = pipeline.open_invoice()
    sent = pipeline.propose(
        "payment.charge_card",
        {"invoice_id": invoice, "amount_cents": 125000, "currency": "USD"},
        idempotency_key=f"evidence-{uuid.uuid4().hex}",
    )
    approval_id = _approval_of(pipeline, sent)
    # A second finance controller of its own, whose key is rotated after it approved: the bundle
    # carries the key as registered when its decision was counted, which still verifies it.
    fay = f"fay-{uuid.uuid4().hex[:8]}"
    added = pipeline.cli(
        "approvers",
        "add",
        fay,
        "--risk-classes",
        "HIGH_RISK_EXTERNAL,CRITICAL_MUTATION",
        "--groups",
        "finance-controllers",
        "--tenant",
        "acme",
    )
    assert added.returncode == 0, added.stdout + added.stderr
    for approver in ("alice", fay):
        assert pipeline.cli("approvals", "approve", approval_id, "--as", approver).returncode == 0
    assert taxonomy(pipeline.wait(sent)) == "SUCCESS"
    assert pipeline.cli("approvers", "rotate", fay).returncode == 0
    refused = pipeline.propose(
        "payment.charge_card",
        {"invoice_id": pipeline.open_invoice(amount_cents=1_500_000), "amount_cents": 1_500_000, "currency": "USD"},
    )
    assert taxonomy(pipeline.wait(refused)) == "POLICY_VIOLATION"

    charge = evidence(pipeline, sent.call_id)
    assert len(charge["approval"]["decisions"]) == 2 and charge["approval"]["ticket"]["state_version"]
    ours, theirs = verdicts(pipeline, charge, tmp_path / "charge.json", keys)
    assert failed(ours) == failed(theirs) == set(), (ours, theirs)
    assert ours[REDERIVED] == "ok" and theirs[REDERIVED] == "skipped"
    assert {n for n, s in ours.items() if s == "skipped"} <= {"checkpoint.cosignatures"}, ours
    assert {n: s for n, s in ours.items() if n != REDERIVED} == {n: s for n, s in theirs.items() if n != REDERIVED}

    for what, (tamper, must_fail) in TAMPERINGS.items():
        bundle = json.loads(json.dumps(charge))
        tamper(bundle)
        ours, theirs = verdicts(pipeline, bundle, tmp_path / "tampered.json", keys)
        # toolgate's own also makes the decisions again: an argument changed is not the call decided
        assert failed(ours) - {REDERIVED} == failed(theirs) == must_fail, (what, ours, theirs)

    denied = evidence(pipeline, refused.call_id)
    ours, theirs = verdicts(pipeline, denied, tmp_path / "refused.json", keys)
    assert failed(ours) == failed(theirs) == set(), (ours, theirs)
    assert ours[REDERIVED] == "ok"  # the policy's refusal, made again on its recorded inputs
    assert {n for n, s in ours.items() if s == "ok"} >= {
        "proposal.signature",
        "proposal.arguments",
        "call.payload_hash",
        "observation.signature",
        "audit.inclusion",
    }


def test_the_evidence_of_an_executed_call_and_of_a_refused_call_verifies(pipeline: Pipeline, tmp_path: Path) -> None:
    began = datetime.now(UTC) - timedelta(seconds=5)
    deployment_keys = [bytes.fromhex(k) for k in pipeline.runtime["deployment_public_key"].split(",")]
    email = {"to": "ap@coyote.example", "subject": "Invoice inv_acme0001", "body": "Evidence, please."}
    sent = pipeline.propose("notify.send_email", email, idempotency_key=f"evidence-{uuid.uuid4().hex}")
    approval_id = _approval_of(pipeline, sent)
    approved = pipeline.cli("approvals", "approve", approval_id, "--as", "carol", "--wait", "5")
    assert approved.returncode == 0, approved.stdout + approved.stderr
    assert taxonomy(pipeline.wait(sent)) == "SUCCESS"
    huge = {"invoice_id": pipeline.open_invoice(amount_cents=1_500_000), "amount_cents": 1_500_000, "currency": "USD"}
    refused = pipeline.propose("payment.charge_card", huge)
    assert taxonomy(pipeline.wait(refused)) == "POLICY_VIOLATION"

    executed = evidence(pipeline, sent.call_id)
    check_proposal(executed)
    assert executed["call"]["payload_hash"] == payload_hash(executed["call"]["arguments"])
    assert executed["call"]["arguments"]["to"] == "ap@coyote.example"
    assert [d["outcome"] for d in executed["decisions"] if d["stage"] == "policy"] == ["allow"]
    ticket = executed["approval"]["ticket"]
    assert ticket["approval_id"] == approval_id and ticket["status"] == "APPROVED"
    [decision] = executed["approval"]["decisions"]
    [carol] = executed["keys"]["approvers"]
    assert decision["approver_id"] == carol["approver_id"] == "carol" and decision["verdict"] == "APPROVE"
    assert PublicKey(_b(carol["public_key"])).ok(_b(decision["signature"]), _b(decision["signed"]))
    assert json.loads(_b(decision["signed"]))["payload_hash"] == ticket["payload_hash"]
    assert executed["execution"]["status"] == "COMPLETED"
    assert [r["action"] for r in executed["audit"]["rows"]].count("executed") == 1
    check_observations(executed)
    check_audit(executed, deployment_keys)

    denied = evidence(pipeline, refused.call_id)
    check_proposal(denied)
    assert [(d["stage"], d["outcome"]) for d in denied["decisions"]] == [("policy", "refuse")]
    assert denied["approval"] is None and denied["execution"] is None
    assert "refused" in [r["action"] for r in denied["audit"]["rows"]]
    check_observations(denied)
    check_audit(denied, deployment_keys)

    out = tmp_path / "export"
    exported = pipeline.cli("evidence", "export", "--since", began.isoformat(), "--tenant", "acme", "--out", str(out))
    assert exported.returncode == 0, exported.stdout + exported.stderr
    for bundle in (executed, denied):
        written = json.loads((out / f"acme.{bundle['call_id']}.json").read_text())
        hashes = [[r["hash"] for r in b["audit"]["rows"]] for b in (written, bundle)]
        assert hashes[0][: len(hashes[1])] == hashes[1] and written["decisions"] == bundle["decisions"]
