"""A call's evidence bundle read from the real Postgres (issue 53, parts 1 and 4): every section
from its table, the audit rows' inclusion proofs to the newest tree head with the witness's
cosignature in its note; a row before migration 0036 leaves its fields null; the pruner keeps the
bundle before retention deletes the call's rows (and the rows stay until it is kept), `toolgate
evidence` then reads the archive, and `evidence export` writes live and archived calls alike."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.unit.factories import contracts, proposal, stage_record
from toolgate.ops import evidence as ops_evidence
from toolgate.ops.evidence_checks.run import verify
from toolgate.ops.evidence_checks.trust import trust_of
from toolgate.ops.evidence_checks.verdict import Status
from toolgate.schemas.codec import codec
from toolgate.schemas.hashing import payload_hash
from toolgate.schemas.models import ApprovalDecision, Verdict
from toolgate.schemas.wire import canonical_json
from toolgate.settings import Settings
from toolgate.store import audit, call_decisions, evidence_archive
from toolgate.store import evidence as evidence_store
from toolgate.store.db import make_pool
from toolgate.store.retention import STATEMENTS, delete_batch
from toolgate.store.rows import Decided
from toolgate.trust import proposal_signing, signing
from toolgate.trust.checkpoint_keys import use_key
from toolgate.trust.ed25519 import PrivateKey, PublicKey
from toolgate.trust.integrity import KEY_HEADER, SIGNATURE_HEADER, EdgeVerifier, deployment_keys, edge_signed_bytes
from toolgate.trust.log_tree import inclusion_ok
from toolgate.trust.signed_note import COSIGNATURE_V1, cosign, cosigned_at, parse, signed_by, vkey
from toolgate.workers.reconciliation.archive import archive_due
from toolgate.workers.reconciliation.evidence import PublicKeys
from toolgate.workers.reconciliation.tree_heads import TreeHeads

from .conftest import Database

ORIGIN = "toolgate.test/evidence"
WITNESS = "witness.test/e1"
CHARGE = {"customer_id": "cus_1", "amount_cents": 1250, "currency": "USD"}


@dataclass(frozen=True)
class Seeded:
    settings: Settings
    call_id: str
    old_call_id: str
    agent: PrivateKey
    approver: Ed25519PrivateKey
    deployment: bytes
    witness: PrivateKey


@pytest.fixture(scope="module")
def seeded(database: Database) -> Iterator[Seeded]:
    keys = deployment_keys(database.settings)
    use_key(keys.signing_key)
    witness = PrivateKey(os.urandom(32))
    witnesses = json.dumps([{"name": WITNESS, "url": "http://127.0.0.1:9", "public_key": witness.public.raw.hex()}])
    settings = replace(database.settings, audit_origin=ORIGIN, audit_witnesses=witnesses)
    tag = uuid.uuid4().hex[:8]
    found = Seeded(
        settings,
        f"call_ev_{tag}",
        f"call_old_{tag}",
        PrivateKey(os.urandom(32)),
        Ed25519PrivateKey.generate(),
        keys.public_key,
        witness,
    )
    _seed(database, found, keys)
    asyncio.run(_head(settings, witness))
    try:
        yield found
    finally:
        use_key(None)


def _seed(database: Database, s: Seeded, keys: Any) -> None:
    contract = next(c for c in contracts() if c.name == "payment.charge_card")
    signed = proposal_signing.sign(
        proposal(contract.name, CHARGE, tool_version=contract.version, call_id=s.call_id, principal=_principal()),
        "k1",
        s.agent,
    )
    record = stage_record(contract, CHARGE, call_id=s.call_id, payload_hash=payload_hash(CHARGE))
    digest = proposal_signing.digest(signed)
    decision = signing.sign(
        ApprovalDecision(
            decision_id=f"dec_{s.call_id}",
            approval_id=f"apr_{s.call_id}",
            decision=Verdict.APPROVE,
            approver_id=f"alice_{s.call_id}",
            tool_name=contract.name,
            tool_version=contract.version,
            payload_hash=payload_hash(CHARGE),
            decided_at_ms=1_800_000_000_000,
            expires_at_ms=1_800_000_300_000,
            state_version="v7",
            signature=b"",
        ),
        s.approver,
    )
    value = b"an observation's bytes"
    headers: list[tuple[str, bytes | None]] = [
        ("call_id", s.call_id.encode()),
        ("toolgate-proposal", digest.encode()),
        (KEY_HEADER, keys.key_id.encode()),
    ]
    topic = "tg.tenant.acme.observations"
    headers.append((SIGNATURE_HEADER, keys.signing_key.sign(edge_signed_bytes(topic, b"k", headers, value))))
    with psycopg.connect(database.database_url) as conn, conn.transaction():
        conn.execute("INSERT INTO toolgate.tenants (tenant_id) VALUES ('acme') ON CONFLICT DO NOTHING")
        conn.execute(
            "INSERT INTO toolgate.agents (agent_id, tenant_id) VALUES ('agent_1', 'acme') ON CONFLICT DO NOTHING"
        )
        conn.execute(
            "INSERT INTO toolgate.agent_keys (agent_id, key_id, public_key) VALUES ('agent_1', 'k1', %s) "
            "ON CONFLICT (agent_id, key_id) DO UPDATE SET public_key = excluded.public_key",
            (s.agent.public.raw,),
        )
        conn.execute(
            "INSERT INTO toolgate.calls (tenant_id, call_id, proposal_digest, agent_id, signed_document, signature, "
            "arguments) VALUES ('acme', %s, %s, 'agent_1', %s, %s, %s)",
            (s.call_id, digest, proposal_signing.signed_bytes(signed), signed.signature, signed.arguments),
        )
        conn.execute(
            "INSERT INTO toolgate.calls (tenant_id, call_id, proposal_digest, agent_id) "
            "VALUES ('acme', %s, 'd', 'agent_1')",
            (s.old_call_id,),
        )
        row = Decided("acme", s.call_id, "policy", 1, contract.name, contract.version, "c", "p", "allow", approvals=1)
        conn.execute(*call_decisions.record([replace(row, record=codec().encode(record))]))
        conn.execute(
            "INSERT INTO toolgate.approvers (approver_id, public_key, risk_classes) VALUES (%s, %s, '{high}')",
            (decision.approver_id, signing.public_bytes(s.approver)),
        )
        conn.execute(
            "INSERT INTO toolgate.approvals (approval_id, call_id, tenant_id, run_id, tool_name, tool_version, "
            "payload_hash, risk_class, required_approvals, status, home_partition, request, packet, expires_at, "
            "decided_at, state_version) VALUES (%s, %s, 'acme', 'run_1', %s, %s, %s, 'high', 1, 'APPROVED', 0, '', "
            "'{}', now() + interval '1 hour', now(), 'v7')",
            (decision.approval_id, s.call_id, contract.name, contract.version, decision.payload_hash),
        )
        conn.execute(
            "INSERT INTO toolgate.approval_decisions (decision_id, approval_id, approver_id, verdict, decided_at, "
            "signed, signature) VALUES (%s, %s, %s, 'APPROVE', now(), %s, %s)",
            (
                decision.decision_id,
                decision.approval_id,
                decision.approver_id,
                signing.signed_bytes(decision),
                decision.signature,
            ),
        )
        conn.execute(
            "INSERT INTO toolgate.idempotency_keys (tenant_id, idempotency_key, request_hash, status, tool_name, "
            "tool_version, executor, call_id, home_partition, request, response, expires_at, completed_at) "
            "VALUES ('acme', %s, %s, 'COMPLETED', %s, %s, 'http', %s, 0, '', '{\"ok\": true}', "
            "now() + interval '1 day', now())",
            (record.call.idempotency_key, record.call.request_hash, contract.name, contract.version, s.call_id),
        )
        conn.execute(
            "INSERT INTO toolgate.observations (tenant_id, call_id, topic, key, value, headers) "
            "VALUES ('acme', %s, %s, 'k', %s, %s)",
            (s.call_id, topic, value, json.dumps([[n, base64.b64encode(v).decode()] for n, v in headers])),
        )
        entries = [audit.Entry("execution", a, "user_1", s.call_id, "acme", {"n": a}) for a in ("executed", "answered")]
    asyncio.run(_append(database.database_url, entries))


def _principal() -> Any:
    from tests.unit.factories import principal

    return principal()


async def _append(url: str, entries: list[audit.Entry]) -> None:
    async with await psycopg.AsyncConnection.connect(url) as conn, conn.transaction():
        await audit.append(conn, entries)


async def _head(settings: Settings, witness: PrivateKey) -> None:
    """A tree head over the log, as the reconciliation worker takes it, and the witness's cosignature."""
    heads = TreeHeads(settings)
    await heads.pool.open()
    try:
        head = await heads.take()
    finally:
        await heads.close()
    assert head is not None
    line = cosign(parse(head.note).text, WITNESS, witness, 1_800_000_000).line()
    async with await psycopg.AsyncConnection.connect(settings.database_url) as conn, conn.transaction():
        await conn.execute(
            "INSERT INTO toolgate.audit_cosignatures (head_id, witness, outcome, cosignature, status, answer) "
            "VALUES (%s, %s, 'cosigned', %s, 200, '')",
            (head.id, WITNESS, line),
        )


def _b(text: str) -> bytes:
    return base64.b64decode(text)


def test_a_bundle_carries_every_section_and_each_signature_and_proof_in_it_verifies(seeded: Seeded) -> None:
    bundle = ops_evidence.bundle(seeded.settings, seeded.call_id)
    assert bundle["format"] == "toolgate.evidence/v1" and bundle["tenant_id"] == "acme"
    keys = bundle["keys"]
    agent = PublicKey(_b(keys["agent"]["public_key"]))
    assert agent.ok(_b(bundle["proposal"]["signature"]), _b(bundle["proposal"]["document"]))
    assert json.loads(_b(bundle["proposal"]["document"]))["call_id"] == seeded.call_id
    assert bundle["call"]["arguments"] == CHARGE and bundle["call"]["payload_hash"] == payload_hash(CHARGE)
    [decision] = bundle["decisions"]
    assert decision["stage"] == "policy" and decision["outcome"] == "allow" and decision["record"]
    [approver] = keys["approvers"]
    [signed] = bundle["approval"]["decisions"]
    assert PublicKey(_b(approver["public_key"])).ok(_b(signed["signature"]), _b(signed["signed"]))
    assert json.loads(_b(signed["signed"]))["state_version"] == bundle["approval"]["ticket"]["state_version"] == "v7"
    assert bundle["execution"]["status"] == "COMPLETED" and bundle["execution"]["call_id"] == seeded.call_id
    [seen] = bundle["observations"]
    headers = [(n, None if v is None else _b(v)) for n, v in seen["headers"]]
    deployment = [_b(k["public_key"]) for k in keys["deployment"]]
    assert seeded.deployment in deployment
    assert EdgeVerifier(deployment).ok(seen["topic"], _b(seen["key"]), headers, _b(seen["value"]))
    checkpoint, rows = bundle["audit"]["checkpoint"], bundle["audit"]["rows"]
    assert [r["action"] for r in rows] == ["executed", "answered"] and bundle["audit"]["uncovered"] == 0
    for row in rows:
        proof = [bytes.fromhex(h) for h in row["inclusion"]]
        root = bytes.fromhex(checkpoint["root_hash"])
        assert inclusion_ok(bytes.fromhex(row["hash"]), row["leaf_index"], checkpoint["tree_size"], proof, root)
    note = parse(checkpoint["note"])
    assert signed_by(note, ORIGIN, PublicKey(seeded.deployment))
    [witness] = keys["witnesses"]
    assert witness["vkey"] == vkey(WITNESS, COSIGNATURE_V1, seeded.witness.public.raw)
    assert cosigned_at(note, WITNESS, seeded.witness.public) == 1_800_000_000


def test_a_call_before_0036_has_null_fields_and_rows_newer_than_the_head_no_proof(seeded: Seeded) -> None:
    asyncio.run(
        _append(seeded.settings.database_url, [audit.Entry("validation", "late", "x", seeded.old_call_id, "acme")])
    )
    bundle = ops_evidence.bundle(seeded.settings, seeded.old_call_id, "acme")
    assert bundle["proposal"] == {"document": None, "signature": None, "proof": None, "arguments": None}
    assert bundle["call"]["arguments"] is None and bundle["call"]["proposal_digest"] == "d"
    assert bundle["keys"]["agent"] is None and bundle["approval"] is None and bundle["execution"] is None
    [row] = bundle["audit"]["rows"]
    assert row["inclusion"] is None and row["leaf_index"] is None and bundle["audit"]["uncovered"] == 1
    with pytest.raises(ops_evidence.NoEvidence, match="no tenant has a call nope"):
        ops_evidence.bundle(seeded.settings, "nope")


def _age(database_url: str, call_id: str) -> None:
    with psycopg.connect(database_url) as conn, conn.transaction():
        for table, column in (("calls", "at"), ("call_decisions", "at"), ("approvals", "decided_at")):
            conn.execute(
                f"UPDATE toolgate.{table} SET {column} = now() - interval '40 days' WHERE call_id = %s", (call_id,)
            )


def _prune(database_url: str) -> dict[str, int]:
    async def run() -> dict[str, int]:
        params = {"age": 30 * 86_400.0, "batch": 100, "refusing": [], "tombstone": 365 * 86_400.0}
        done = {}
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
            for table, statement, age_of in STATEMENTS:
                if age_of != "usage_daily_days":
                    done[table] = await delete_batch(conn, statement, params)
        return done

    return asyncio.run(run())


async def _archive(settings: Settings) -> int:
    pool = make_pool(settings.database_url, "evidence-test", max_size=1)
    await pool.open()
    try:
        return await archive_due(pool, PublicKeys.of(settings), 30 * 86_400.0, budget_s=60.0)
    finally:
        await pool.close()


def test_the_bundle_is_kept_before_retention_prunes_the_calls_rows_and_read_from_the_archive(
    seeded: Seeded, database: Database, tmp_path: Path
) -> None:
    _age(database.database_url, seeded.call_id)
    live = ops_evidence.bundle(seeded.settings, seeded.call_id)
    _prune(database.database_url)
    assert database.sql("SELECT count(*) FROM toolgate.calls WHERE call_id = %s", (seeded.call_id,)) == [(1,)]

    assert asyncio.run(_archive(seeded.settings)) >= 1
    pruned = _prune(database.database_url)
    assert pruned["calls"] >= 1 and pruned["approvals"] >= 1 and pruned["call_decisions"] >= 1
    for table in ("calls", "call_decisions", "approvals"):
        assert database.sql(f"SELECT count(*) FROM toolgate.{table} WHERE call_id = %s", (seeded.call_id,)) == [(0,)]

    kept = ops_evidence.bundle(seeded.settings, seeded.call_id)
    assert {k: v for k, v in kept.items() if k != "made_at"} == {k: v for k, v in live.items() if k != "made_at"}
    with pytest.raises(psycopg.errors.RaiseException):
        database.sql("DELETE FROM toolgate.evidence_bundles")

    out = tmp_path / "export"
    written = ops_evidence.export(seeded.settings, datetime(2000, 1, 1, tzinfo=UTC), out, "acme")
    names = {p.name for p in out.iterdir()}
    assert (
        written == len(names) and f"acme.{seeded.call_id}.json" in names and f"acme.{seeded.old_call_id}.json" in names
    )
    exported = json.loads((out / f"acme.{seeded.call_id}.json").read_text())
    assert exported["approval"] == live["approval"] and exported["audit"]["rows"] == live["audit"]["rows"]
    assert asyncio.run(_kept(database.database_url, seeded.call_id)) == 1


async def _kept(url: str, call_id: str) -> int:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        return 1 if await evidence_archive.archived(conn, "acme", call_id) is not None else 0


def test_a_call_still_held_for_approval_is_not_archived_and_keeps_its_rows(seeded: Seeded, database: Database) -> None:
    held = f"call_held_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(database.database_url) as conn, conn.transaction():
        conn.execute(
            "INSERT INTO toolgate.calls (tenant_id, call_id, proposal_digest, agent_id, at) "
            "VALUES ('acme', %s, 'd', 'agent_1', now() - interval '40 days')",
            (held,),
        )
        conn.execute(
            "INSERT INTO toolgate.approvals (approval_id, call_id, tenant_id, run_id, tool_name, tool_version, "
            "payload_hash, risk_class, required_approvals, status, home_partition, request, packet, expires_at) "
            "VALUES (%s, %s, 'acme', 'r', 't', '1', 'h', 'high', 1, 'PENDING', 0, '', '{}', now())",
            (f"apr_{held}", held),
        )
    asyncio.run(_archive(seeded.settings))
    _prune(database.database_url)
    assert asyncio.run(_kept(database.database_url, held)) == 0
    assert database.sql("SELECT count(*) FROM toolgate.calls WHERE call_id = %s", (held,)) == [(1,)]


def test_proofs_start_from_the_head_before_the_calls_first_row(seeded: Seeded) -> None:
    call_id, url = f"call_late_{uuid.uuid4().hex[:8]}", seeded.settings.database_url
    filler = [audit.Entry("reconciliation", "filler", "x", None, "acme") for _ in range(3)]
    asyncio.run(_append(url, filler))
    asyncio.run(_head(seeded.settings, seeded.witness))
    asyncio.run(_append(url, [audit.Entry("validation", "refused", "x", call_id, "acme") for _ in range(2)] + filler))
    asyncio.run(_head(seeded.settings, seeded.witness))
    bundle = ops_evidence.bundle(seeded.settings, call_id, "acme")
    checkpoint, rows = bundle["audit"]["checkpoint"], bundle["audit"]["rows"]
    assert len(rows) == 2 and bundle["audit"]["uncovered"] == 0
    first = asyncio.run(_head_before(url, rows[0]["id"]))
    assert 0 < first < rows[0]["leaf_index"] + 1  # a head before the call's rows: the proofs started there
    for row in rows:
        proof = [bytes.fromhex(h) for h in row["inclusion"]]
        root = bytes.fromhex(checkpoint["root_hash"])
        assert inclusion_ok(bytes.fromhex(row["hash"]), row["leaf_index"], checkpoint["tree_size"], proof, root)
    assert rows[1]["leaf_index"] == rows[0]["leaf_index"] + 1


def test_the_checkpoint_is_the_first_head_over_the_calls_rows_however_many_heads_follow(seeded: Seeded) -> None:
    """A bundle's proofs go to the first head that covers the call's rows, not the newest: the same
    checkpoint whenever it is made, and proofs that read the rows of the call's own time."""
    call_id, url = f"call_first_{uuid.uuid4().hex[:8]}", seeded.settings.database_url
    asyncio.run(_append(url, [audit.Entry("validation", "refused", "x", call_id, "acme") for _ in range(2)]))
    asyncio.run(_head(seeded.settings, seeded.witness))
    first = ops_evidence.bundle(seeded.settings, call_id, "acme")["audit"]["checkpoint"]
    for _ in range(2):
        asyncio.run(_append(url, [audit.Entry("reconciliation", "filler", "x", None, "acme")]))
        asyncio.run(_head(seeded.settings, seeded.witness))
    later = ops_evidence.bundle(seeded.settings, call_id, "acme")
    assert later["audit"]["checkpoint"] == first and later["audit"]["uncovered"] == 0
    assert first["tree_size"] == later["audit"]["rows"][-1]["leaf_index"] + 1


async def _head_before(url: str, row_id: int) -> int:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        head = await evidence_store.head_before(conn, row_id)
        return head.tree_size if head else 0


EDIT_TICKET = (
    "INSERT INTO toolgate.approvals (approval_id, call_id, tenant_id, run_id, tool_name, tool_version, payload_hash, "
    "risk_class, required_approvals, status, home_partition, request, packet, created_at, expires_at, decided_at, "
    "state_version, edited_by, edit_decision_id, edited_payload_hash, edit_of) VALUES (%s, %s, 'acme', 'run_1', %s, "
    "%s, %s, 'high', 1, %s, 0, '', %s, now() - %s * interval '1 minute', now() + interval '1 hour', now(), 'v7', "
    "%s, %s, %s, %s)"
)
VOTE = (
    "INSERT INTO toolgate.approval_decisions (decision_id, approval_id, approver_id, verdict, decided_at, signed, "
    "signature) VALUES (%s, %s, %s, 'APPROVE', now(), %s, %s)"
)


def test_an_edited_calls_bundle_carries_the_edit_and_proves_its_arguments_and_editor(
    seeded: Seeded, database: Database
) -> None:
    """The calls row is the agent's original; the edit (the original ticket, closed EDITED, and the
    editor's signed decision on it) proves the edited arguments and counts the editor, whose vote on
    the edited ticket is stored unsigned."""
    tag = uuid.uuid4().hex[:8]
    call_id, editor, held, again = f"call_edit_{tag}", f"ed_{tag}", f"apr_held_{tag}", f"apr_edited_{tag}"
    contract = next(c for c in contracts() if c.name == "payment.charge_card")
    edited = {**CHARGE, "amount_cents": 1000}
    signed = proposal_signing.sign(
        proposal(contract.name, CHARGE, tool_version=contract.version, call_id=call_id, principal=_principal()),
        "k1",
        seeded.agent,
    )
    now_ms = int(datetime.now(UTC).timestamp() * 1000)
    edit = signing.sign(
        ApprovalDecision(
            decision_id=f"dec_{tag}",
            approval_id=held,
            decision=Verdict.APPROVE,
            approver_id=editor,
            tool_name=contract.name,
            tool_version=contract.version,
            payload_hash=payload_hash(CHARGE),
            decided_at_ms=now_ms - 30_000,
            expires_at_ms=now_ms + 300_000,
            state_version="v7",
            edited_arguments=canonical_json(edited),
            signature=b"",
        ),
        seeded.approver,
    )
    record = stage_record(contract, CHARGE, call_id=call_id, payload_hash=payload_hash(CHARGE))  # the original
    with psycopg.connect(database.database_url) as conn, conn.transaction():
        conn.execute(
            "INSERT INTO toolgate.calls (tenant_id, call_id, proposal_digest, agent_id, signed_document, signature, "
            "arguments) VALUES ('acme', %s, %s, 'agent_1', %s, %s, %s)",
            (
                call_id,
                proposal_signing.digest(signed),
                proposal_signing.signed_bytes(signed),
                signed.signature,
                signed.arguments,
            ),
        )
        row = Decided("acme", call_id, "policy", 1, contract.name, contract.version, "c", "p", "allow", approvals=1)
        conn.execute(*call_decisions.record([replace(row, record=codec().encode(record))]))
        conn.execute(
            "INSERT INTO toolgate.approvers (approver_id, public_key, risk_classes, created_at) "
            "VALUES (%s, %s, '{high}', now() - interval '1 day')",
            (editor, signing.public_bytes(seeded.approver)),
        )
        original = (held, call_id, contract.name, contract.version, payload_hash(CHARGE), "EDITED")
        conn.execute(
            EDIT_TICKET,
            (*original, json.dumps({"arguments": CHARGE}), 2, editor, edit.decision_id, payload_hash(edited), None),
        )
        conn.execute(VOTE, (edit.decision_id, held, editor, signing.signed_bytes(edit), edit.signature))
        ticket = (again, call_id, contract.name, contract.version, payload_hash(edited), "APPROVED")
        conn.execute(EDIT_TICKET, (*ticket, json.dumps({"arguments": edited}), 1, None, None, None, held))
        conn.execute(VOTE, (f"{edit.decision_id}.edited", again, editor, None, None))

    bundle = ops_evidence.bundle(seeded.settings, call_id, "acme")
    assert bundle["approval"]["ticket"]["approval_id"] == again
    assert bundle["edit"]["ticket"]["approval_id"] == held and bundle["edit"]["ticket"]["status"] == "EDITED"
    assert "edit_decision_id" not in bundle["edit"]["ticket"]
    assert bundle["edit"]["decision"]["decision_id"] == edit.decision_id
    assert [a["approver_id"] for a in bundle["keys"]["approvers"]] == [editor]
    verdict = verify(bundle, trust_of(bundle))
    assert verdict.status_of("call.payload_hash") is Status.OK
    assert verdict.status_of("approval.quorum") is Status.OK  # the editor, by the edit
    assert verdict.status_of("approval.signatures") is Status.SKIPPED  # the edited ticket's vote: unsigned
    assert ops_evidence.bundle(seeded.settings, seeded.call_id)["edit"] is None
