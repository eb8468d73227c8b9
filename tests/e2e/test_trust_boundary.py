"""The trust boundary against someone who can write to any topic, through the real broker and Postgres.

One test per hole issue 8 found; each attack is refused (no effect anywhere, a typed answer
only where a signature proves who asked) and audited in the hash-chained audit log.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest

from tests.unit.factories import record_of
from toolgate.client import Proposed
from toolgate.schemas.codec import codec
from toolgate.schemas.hashing import payload_hash
from toolgate.schemas.models import (
    DeadLetter,
    PayloadKind,
    Principal,
    StageBatch,
    StageRecord,
    TaxonomyClass,
    ToolProposal,
)
from toolgate.topics.catalog import Topics
from toolgate.topics.headers import CALL_ID, SCHEMA, edge_headers, new_traceparent
from toolgate.trust.agent_keys import AgentKeyring, AgentSigner
from toolgate.trust.ed25519 import PrivateKey
from toolgate.trust.integrity import Sealer, deployment_keys
from toolgate.trust.proposal_signing import sign
from toolgate.trust.signing import new_key

from ..conftest import Pipeline, eventually, session_broker, session_secure
from .test_gates import Approvers, packet_of
from .test_pipeline import _approval_of, _ledger_for, errors_of, taxonomy

pytestmark = pytest.mark.timeout(180)

TOPICS = Topics()
ALL_SCOPES = ["invoices:read", "invoices:write", "notify:send", "payments:charge"]


def audit_rows(pipeline: Pipeline, call_id: str) -> list[tuple[str, str, str, str | None]]:
    """(stage, action, code, tenant) of every audit row about a call."""
    rows = pipeline.sql(
        "SELECT stage, action, coalesce(detail->>'code', detail->>'taxonomy', ''), tenant_id FROM toolgate.audit_log "
        "WHERE call_id = %s ORDER BY id",
        (call_id,),
    )
    return [(str(s), str(a), str(c), t) for s, a, c, t in rows]


def dead_letters(pipeline: Pipeline, call_id: str) -> list[dict[str, Any]]:
    listed = pipeline.cli("dlq", "list", "--json", "--all")
    assert listed.returncode == 0, listed.stderr
    return [r for r in json.loads(listed.stdout) if r["call_id"] == call_id]


def nothing_answered(pipeline: Pipeline, call_id: str, tenants: tuple[str, ...] = ("acme", "globex")) -> bool:
    time.sleep(1.5)  # what would have been answered by now has been
    return not [
        o for t in tenants for o in pipeline.client.observations(tenant_id=t, call_ids=[call_id], idle_timeout=1.0)
    ]


def raw_proposal(**fields: Any) -> ToolProposal:
    run_id = f"run_{uuid.uuid4().hex[:10]}"
    base: dict[str, Any] = {
        "call_id": f"call_{uuid.uuid4().hex}",
        "tenant_id": "acme",
        "principal": Principal(user_id="mallory", agent_id="cli", scopes=ALL_SCOPES),
        "workflow_id": run_id,
        "run_id": run_id,
        "logical_operation_id": f"op_{uuid.uuid4().hex[:8]}",
        "tool_name": "invoice.fetch",
        "tool_version": "latest",
        "arguments": '{"invoice_id": "inv_acme0001"}',
        "created_at_ms": int(time.time() * 1000),
    }
    return ToolProposal(**{**base, **fields})


def publish_proposal(pipeline: Pipeline, proposal: ToolProposal) -> None:
    """Straight onto tool.proposals, as anyone with produce access could."""
    c = codec()
    headers = edge_headers(new_traceparent(), proposal.call_id, proposal.tenant_id, c.fingerprint_of(ToolProposal))
    pipeline.client.publish_raw(TOPICS.proposals, proposal.run_id.encode(), c.encode(proposal), headers)
    pipeline.client.flush()


def register_agent(pipeline: Pipeline, scopes: str) -> tuple[str, AgentKeyring]:
    agent = f"agent-{uuid.uuid4().hex[:8]}"
    added = pipeline.cli("agents", "add", agent, "--tenant", "acme", "--scopes", scopes)
    assert added.returncode == 0, added.stderr
    return agent, AgentKeyring(pipeline.home / "agents")


# --- who asked -------------------------------------------------------------------------------


def test_an_unsigned_proposal_claiming_another_tenant_runs_nothing_and_is_audited(pipeline: Pipeline) -> None:
    # The attack as it was found: globex's tenant, every scope, straight onto the topic.
    draft = {
        "customer_id": "cust_globex01",
        "currency": "EUR",
        "due_date": "2030-12-31",
        "lines": [{"description": "forged", "quantity": 1, "unit_amount_cents": 100}],
    }
    forged = raw_proposal(
        tenant_id="globex",
        principal=Principal(user_id="mallory", agent_id="globex-cli", scopes=ALL_SCOPES),
        tool_name="invoice.create_draft",
        arguments=json.dumps(draft),
    )
    publish_proposal(pipeline, forged)
    assert eventually(lambda: audit_rows(pipeline, forged.call_id)) == [("validation", "refused", "unsigned", None)]
    [letter] = eventually(lambda: dead_letters(pipeline, forged.call_id))
    assert (letter["stage"], letter["taxonomy_class"], letter["source"].split("[")[0]) == (
        "validation",
        "PERMISSION_DENIED",
        "proposals",
    )
    assert nothing_answered(pipeline, forged.call_id)
    assert pipeline.sql("SELECT count(*) FROM demo.invoices WHERE created_by_call = %s", (forged.call_id,)) == [(0,)]


def test_a_signed_proposal_claiming_another_tenant_is_refused_to_its_own(pipeline: Pipeline) -> None:
    sent = pipeline.propose("invoice.fetch", {"invoice_id": "inv_globex0001"}, tenant_id="acme")
    claims = pipeline.client.propose(
        "invoice.fetch", {"invoice_id": "inv_globex0001"}, agent_id="cli", tenant_id="globex", user_id="u", watch=True
    )
    observation = pipeline.wait(claims)  # on acme's topic: where the agent is registered
    assert (taxonomy(observation), errors_of(observation)) == ("PERMISSION_DENIED", [("principal", "tenant_mismatch")])
    assert list(observation["result_payload"]["data"]) == ["feedback"]  # nothing of globex's invoice
    assert audit_rows(pipeline, claims.call_id) == [("validation", "refused", "tenant_mismatch", "acme")]
    assert nothing_answered(pipeline, claims.call_id, ("globex",))
    assert taxonomy(pipeline.wait(sent)) == "STALE_STATE"  # acme's own claim on globex's invoice: as if missing


def test_a_bad_signature_and_an_unknown_agent_prove_nobody(pipeline: Pipeline) -> None:
    signer = pipeline.client.signer("cli")
    tampered = signer.sign(raw_proposal()).model_copy(update={"arguments": '{"invoice_id": "inv_acme0002"}'})
    stranger = sign(
        raw_proposal(principal=Principal(user_id="m", agent_id="nobody", scopes=ALL_SCOPES)),
        "k_0",
        PrivateKey.of(new_key()),
    )
    for proposal, code in ((tampered, "bad_signature"), (stranger, "unknown_agent")):
        publish_proposal(pipeline, proposal)
        assert eventually(lambda p=proposal: audit_rows(pipeline, p.call_id)) == [("validation", "refused", code, None)]
        assert eventually(lambda p=proposal: dead_letters(pipeline, p.call_id))
        assert nothing_answered(pipeline, proposal.call_id)


def test_proposals_signed_together_are_each_answered_and_a_forged_member_proves_nobody(pipeline: Pipeline) -> None:
    signer = pipeline.client.signer("cli")
    drafts = [
        pipeline.client.prepare("invoice.fetch", {"invoice_id": "inv_acme0001"}, signer=signer, user_id="u", watch=True)
        for _ in range(3)
    ]
    sent = pipeline.client.publish(drafts)
    published = [codec().decode(p.record.value, ToolProposal) for p in sent if p.record is not None]
    assert len({p.signature for p in published}) == 1 and all(p.signature_proof for p in published)
    assert not any(pipeline.client.wait(p).observation.status.is_error for p in sent)
    # A member of a tree with other arguments, under the tree's signature and with its proof.
    [(genuine, _), _] = signer.sign_all([raw_proposal(), raw_proposal()])
    forged = genuine.model_copy(update={"arguments": '{"invoice_id": "inv_acme0002"}'})
    publish_proposal(pipeline, forged)
    assert eventually(lambda: audit_rows(pipeline, forged.call_id)) == [
        ("validation", "refused", "bad_signature", None)
    ]
    assert eventually(lambda: dead_letters(pipeline, forged.call_id))
    assert nothing_answered(pipeline, forged.call_id)


def test_a_revoked_key_and_a_revoked_agent_are_refused_and_rotation_keeps_the_agent_working(
    pipeline: Pipeline,
) -> None:
    agent, keyring = register_agent(pipeline, "invoices:read")
    first = keyring.signer(agent)
    assert pipeline.cli("agents", "rotate", agent).returncode == 0
    second = keyring.signer(agent)
    assert second.key_id != first.key_id
    revoked = pipeline.cli("agents", "revoke", agent, "--key", first.key_id)
    assert revoked.returncode == 0, revoked.stderr

    def fetch(signer: AgentSigner) -> Proposed:
        return pipeline.client.propose(
            "invoice.fetch", {"invoice_id": "inv_acme0001"}, signer=signer, user_id="u", watch=True
        )

    old = fetch(first)
    assert eventually(lambda: audit_rows(pipeline, old.call_id)) == [("validation", "refused", "revoked_key", None)]
    assert nothing_answered(pipeline, old.call_id)
    assert taxonomy(pipeline.wait(fetch(second))) == "SUCCESS"  # the rotated key still works
    assert pipeline.cli("agents", "revoke", agent).returncode == 0
    gone = fetch(second)
    assert eventually(lambda: audit_rows(pipeline, gone.call_id)) == [("validation", "refused", "revoked_agent", None)]
    changes = pipeline.sql(
        "SELECT action, detail->>'key_id' FROM toolgate.audit_log WHERE stage = 'registry' AND detail->>'agent' = %s "
        "ORDER BY id",
        (agent,),
    )
    assert [a for a, _ in changes] == ["agent_registered", "agent_registered", "agent_key_revoked", "agent_revoked"]


def test_scopes_beyond_the_grant_are_not_granted(pipeline: Pipeline) -> None:
    agent, keyring = register_agent(pipeline, "invoices:read")
    key = f"charge-{uuid.uuid4().hex}"
    sent = pipeline.client.propose(
        "payment.charge_card",
        {"invoice_id": "inv_acme0002", "amount_cents": 125000, "currency": "USD"},
        signer=keyring.signer(agent),
        user_id="u",
        scopes=ALL_SCOPES,  # asks for everything; was granted invoices:read
        idempotency_key=key,
        watch=True,
    )
    observation = pipeline.wait(sent)
    assert (taxonomy(observation), errors_of(observation)) == (
        "PERMISSION_DENIED",
        [("principal.scopes", "missing_scope")],
    )
    assert ("policy", "refused", "missing_scope", "acme") in audit_rows(pipeline, sent.call_id)
    assert pipeline.sql("SELECT count(*) FROM toolgate.approvals WHERE call_id = %s", (sent.call_id,)) == [(0,)]
    assert _ledger_for(pipeline, key) == []


# --- what a stage decided --------------------------------------------------------------------


def _charge_record(key: str, call_id: str) -> StageRecord:
    arguments = {"invoice_id": "inv_acme0002", "amount_cents": 125000, "currency": "USD"}
    return record_of(
        call_id=call_id,
        traceparent=new_traceparent(),
        home_partition=0,
        tenant_id="acme",
        principal=Principal(user_id="mallory", agent_id="cli", scopes=ALL_SCOPES),
        workflow_id="forged",
        run_id="forged",
        logical_operation_id=f"op_{uuid.uuid4().hex[:8]}",
        tool_name="payment.charge_card",
        tool_version="1.0.0",
        arguments=arguments,
        payload_hash=payload_hash(arguments),
        idempotency_key=key,
        created_at_ms=int(time.time() * 1000),
        required_approvals=2,  # and no approvers: the batch as it was found
    )


def _executable_batch(record: StageRecord) -> bytes:
    """A batch as approval-wait would produce it now (a stale one is refused before it is read)."""
    now = int(time.time() * 1000)
    batch = StageBatch(
        stage="approval-wait",
        source_partition=0,
        items=[codec().encode(record)],
        produced_at_ms=now,
        first_produced_at_ms=now,
    )
    return codec().encode(batch)


def test_a_forged_stage_batch_on_executable_charges_nothing(pipeline: Pipeline) -> None:
    key, call_id = f"charge-{uuid.uuid4().hex}", f"call_{uuid.uuid4().hex}"
    value = _executable_batch(_charge_record(key, call_id))
    headers = [(SCHEMA, codec().fingerprint_of(StageBatch).hex().encode()), (CALL_ID, call_id.encode())]
    pipeline.insider.publish_raw(TOPICS.executable, None, value, headers, partition=0)
    pipeline.insider.publish_raw(
        TOPICS.executable, None, value, [*headers, ("toolgate-mac", b"\x00" * 32)], partition=0
    )
    pipeline.insider.flush()
    audited = eventually(lambda: [r for r in audit_rows(pipeline, call_id) if r[1] == "forged_record"])
    assert len(audited) == 2 and {r[0] for r in audited} == {"execution"}
    letters = eventually(lambda: dead_letters(pipeline, call_id))
    assert {(r["stage"], r["taxonomy_class"]) for r in letters} == {("execution", "SIGNATURE_MISMATCH")}
    # The letters are genuine (execution wrote them), but what they hold never was: no replay.
    replay = pipeline.cli("dlq", "replay", letters[0]["dead_letter_id"])
    assert replay.returncode != 0 and "never carried a valid stage MAC" in replay.stderr
    assert audit_rows(pipeline, call_id)[-1] == ("operator", "dead_letter_replay_refused", "", None)
    assert nothing_answered(pipeline, call_id)
    assert _ledger_for(pipeline, key) == []


def test_even_a_sealed_batch_runs_nothing_postgres_has_not_approved(pipeline: Pipeline) -> None:
    # An insider with the deployment secret: the MAC verifies, so execution's own check decides.
    key, call_id = f"charge-{uuid.uuid4().hex}", f"call_{uuid.uuid4().hex}"
    record = _charge_record(key, call_id).model_copy(update={"required_approvals": 0})
    value = _executable_batch(record)
    sealer = Sealer(deployment_keys(pipeline.settings), TOPICS)
    headers = sealer.seal(TOPICS.executable, None, value, [(SCHEMA, codec().fingerprint_of(StageBatch).hex().encode())])
    pipeline.insider.publish_raw(TOPICS.executable, None, value, headers, partition=0)
    pipeline.insider.flush()
    [seen] = eventually(lambda: list(pipeline.client.observations(tenant_id="acme", call_ids=[call_id])))
    observation = seen.as_json()
    assert (taxonomy(observation), errors_of(observation)) == ("CONFIRMATION_MISSING", [(None, "no_approval")])
    assert ("execution", "refused", "CONFIRMATION_MISSING", "acme") in audit_rows(pipeline, call_id)
    assert _ledger_for(pipeline, key) == []


def test_a_forged_dead_letter_is_never_replayed(pipeline: Pipeline) -> None:
    key, call_id = f"charge-{uuid.uuid4().hex}", f"call_{uuid.uuid4().hex}"
    letter = DeadLetter(
        dead_letter_id=f"dl_{uuid.uuid4().hex[:24]}",
        call_id=call_id,
        stage="execution",
        source_topic="executable",
        source_partition=0,
        source_offset=-1,
        payload_kind=PayloadKind.STAGE_ITEM,
        value=codec().encode(_charge_record(key, call_id)),
        taxonomy_class=TaxonomyClass.UNKNOWN_ERROR,
        reason="replay me",
        dead_lettered_at_ms=int(time.time() * 1000),
    )
    pipeline.insider.publish_raw(TOPICS.deadletter, call_id.encode(), codec().encode(letter), [])
    pipeline.insider.flush()
    [listed] = eventually(lambda: dead_letters(pipeline, call_id))
    assert (listed["state"], listed["genuine"]) == ("forged", False)
    replay = pipeline.cli("dlq", "replay", letter.dead_letter_id)
    assert replay.returncode != 0 and "no valid stage MAC" in replay.stderr
    assert audit_rows(pipeline, call_id) == [("operator", "dead_letter_replay_refused", "", None)]
    assert nothing_answered(pipeline, call_id)
    assert _ledger_for(pipeline, key) == []


# --- what may run ----------------------------------------------------------------------------


def test_an_approval_of_a_state_that_changed_before_execution_is_stale_state(pipeline: Pipeline) -> None:
    invoice = f"inv_{uuid.uuid4().hex[:12]}"
    pipeline.sql(
        "INSERT INTO demo.invoices (invoice_id, tenant_id, customer_id, status, currency, amount_cents) "
        "VALUES (%s, 'acme', 'cust_acme01', 'open', 'USD', 5000)",
        (invoice,),
    )
    key = f"charge-{uuid.uuid4().hex}"
    sent = pipeline.propose(
        "payment.charge_card", {"invoice_id": invoice, "amount_cents": 5000, "currency": "USD"}, idempotency_key=key
    )
    approval_id = _approval_of(pipeline, sent)
    packet = packet_of(pipeline, approval_id)
    assert packet.before_state == {"status": "open", "currency": "USD", "amount_cents": 5000}
    assert packet.state_version and packet.state_version.startswith("sha256:")
    pipeline.sql("UPDATE demo.invoices SET amount_cents = 9000 WHERE invoice_id = %s", (invoice,))
    approvers = Approvers(pipeline)
    try:
        for who in ("alice", "bob"):
            approvers.decide(packet, who)  # they approve what they were shown
    finally:
        approvers.close()
    observation = pipeline.wait(sent)
    assert (taxonomy(observation), errors_of(observation)) == ("STALE_STATE", [(None, "state_changed")])
    # It failed where it would have run, so its key is settled: the operation is over.
    assert ("execution", "failed", "STALE_STATE", "acme") in audit_rows(pipeline, sent.call_id)
    assert pipeline.sql("SELECT status FROM toolgate.idempotency_keys WHERE idempotency_key = %s", (key,)) == [
        ("FAILED_FINAL",)
    ]
    time.sleep(1.0)
    assert _ledger_for(pipeline, key) == []


def test_a_decision_naming_another_state_is_refused(pipeline: Pipeline) -> None:
    from .test_gates import decision_audit

    key = f"charge-{uuid.uuid4().hex}"
    sent = pipeline.propose(
        "payment.charge_card",
        {"invoice_id": "inv_acme0002", "amount_cents": 125000, "currency": "USD"},
        idempotency_key=key,
    )
    packet = packet_of(pipeline, _approval_of(pipeline, sent))
    approvers = Approvers(pipeline)
    try:
        other = approvers.forge(packet, "alice", state_version="sha256:" + "0" * 64)
        assert decision_audit(pipeline, other.decision_id) == ("decision_refused", "state_mismatch")
        approvers.decide(packet, "alice", approve=False, reason="cleanup")
    finally:
        approvers.close()


def test_a_decision_detached_from_the_calls_trace_or_scope_is_refused(pipeline: Pipeline) -> None:
    """The seeds' approval token: bound to the trace of the call it approves, for one execution."""
    from .test_gates import decision_audit

    sent = pipeline.propose(
        "payment.charge_card",
        {"invoice_id": "inv_acme0002", "amount_cents": 125000, "currency": "USD"},
        idempotency_key=f"charge-{uuid.uuid4().hex}",
    )
    packet = packet_of(pipeline, _approval_of(pipeline, sent))
    approvers = Approvers(pipeline)
    try:
        shown = packet.state_version  # what the approver saw: right in every forgery here
        elsewhere = approvers.forge(packet, "alice", state_version=shown, trace_id="f" * 32)
        assert decision_audit(pipeline, elsewhere.decision_id) == ("decision_refused", "trace_mismatch")
        standing = approvers.forge(
            packet, "alice", state_version=shown, trace_id=packet.trace_id, approval_scope="standing"
        )
        assert decision_audit(pipeline, standing.decision_id) == ("decision_refused", "scope_not_granted")
        # What ApprovalClient signs names both, and counts.
        counted = approvers.decide(packet, "alice")
        assert (counted.trace_id, counted.approval_scope) == (packet.trace_id, "single_execution")
        assert decision_audit(pipeline, counted.decision_id) == ("decision_counted", "PENDING")
        approvers.decide(packet, "bob", approve=False, reason="cleanup")
    finally:
        approvers.close()


# --- who reads what --------------------------------------------------------------------------


def test_a_tenants_observations_reach_only_its_own_topic_and_forgeries_are_ignored(pipeline: Pipeline) -> None:
    theirs = pipeline.propose("invoice.fetch", {"invoice_id": "inv_globex0001"}, tenant_id="globex")
    assert taxonomy(pipeline.wait(theirs)) == "SUCCESS"
    assert not list(pipeline.client.observations(tenant_id="acme", call_ids=[theirs.call_id], idle_timeout=1.0))
    # Someone writes an observation for a waiting acme call onto acme's topic: it is not toolgate's.
    mine = pipeline.propose("invoice.fetch", {"invoice_id": "inv_acme0001"})
    genuine = pipeline.wait(mine)
    c = codec()
    forged = genuine["result_payload"]["data"] | {"amount_cents": 1}
    from toolgate.schemas.models import Observation

    fake = Observation.model_validate({**genuine, "result_payload": {**genuine["result_payload"], "data": forged}})
    headers = edge_headers(new_traceparent(), mine.call_id, "acme", c.fingerprint_of(Observation), mine.proposal_digest)
    pipeline.insider.publish_raw(TOPICS.name("observations", "acme"), mine.run_id.encode(), c.encode(fake), headers)
    pipeline.insider.flush()
    seen = list(
        pipeline.client.observations(tenant_id="acme", call_ids=[mine.call_id], start_offsets=mine.start_offsets)
    )
    assert [s.observation.result_payload.data["amount_cents"] for s in seen] == [420000]  # type: ignore[index]


def test_a_reused_call_id_is_refused_and_never_answers_the_first_call(pipeline: Pipeline) -> None:
    agent, keyring = register_agent(pipeline, "invoices:read,invoices:write")
    draft = {
        "customer_id": "cust_acme01",
        "currency": "USD",
        "due_date": "2030-12-31",
        "lines": [{"description": "first", "quantity": 1, "unit_amount_cents": 100}],
    }
    operation = f"op_{uuid.uuid4().hex[:8]}"
    first = pipeline.propose("invoice.create_draft", draft, logical_operation_id=operation)
    assert taxonomy(pipeline.wait(first)) == "SUCCESS"
    # The same call again (a client's retry, a redelivery) is the same call: one effect.
    again = pipeline.propose(
        "invoice.create_draft", draft, run_id=first.run_id, call_id=first.call_id, logical_operation_id=operation
    )
    assert again.proposal_digest == first.proposal_digest
    assert pipeline.wait(again)["execution_metadata"]["idempotency_hit"] is True
    reuse = pipeline.client.propose(
        "invoice.create_draft",
        {**draft, "lines": [{"description": "second", "quantity": 9, "unit_amount_cents": 100}]},
        signer=keyring.signer(agent),
        user_id="mallory",
        run_id=first.run_id,
        call_id=first.call_id,
        watch=True,
    )
    refused = pipeline.wait(reuse)
    assert (taxonomy(refused), errors_of(refused)) == ("SIGNATURE_MISMATCH", [("call_id", "call_id_reused")])
    assert ("validation", "refused", "call_id_reused", "acme") in audit_rows(pipeline, first.call_id)
    # The first call's own wait still gets its own answer, never the refusal under its call_id.
    assert pipeline.client.wait(first, timeout=10).observation.status.taxonomy_class == "SUCCESS"
    assert pipeline.sql("SELECT count(*) FROM demo.invoices WHERE created_by_call = %s", (first.call_id,)) == [(1,)]


# --- the broker itself -----------------------------------------------------------------------


def test_setup_acls_names_the_bindings_a_real_kafka_needs(pipeline: Pipeline) -> None:
    done = pipeline.cli(
        "setup", "--acls", "--dry-run", "--approval-service", "User:approvals=acme", "--operator", "User:ops"
    )
    assert done.returncode == 0, done.stderr
    lines = [" ".join(line.split()) for line in done.stdout.splitlines() if line.startswith("ALLOW")]
    assert "ALLOW User:cli READ TOPIC LITERAL tool.observations.acme" in lines
    assert "ALLOW User:cli WRITE TOPIC LITERAL tool.proposals" in lines
    assert "ALLOW User:globex-cli READ TOPIC LITERAL tool.observations.globex" in lines
    assert not [line for line in lines if line.startswith("ALLOW User:cli ") and "globex" in line]
    assert "ALLOW User:approvals READ TOPIC LITERAL tool.approvals.requested.acme" in lines
    assert not [line for line in lines if "User:approvals" in line and "requested.globex" in line]
    assert "ALLOW User:toolgate-execution READ TOPIC LITERAL tool.executable" in lines
    assert "ALLOW User:toolgate-normalization WRITE TOPIC PREFIXED tool.observations." in lines
    assert "ALLOW User:ops READ TOPIC LITERAL tool.deadletter" in lines
    applied = pipeline.cli("setup", "--acls")
    if session_broker()[0] == "tansu":  # the embedded broker has no authorizer
        assert applied.returncode == 1 and "no authorizer" in applied.stdout
    elif session_secure():  # a secured Kafka has one: they are applied (toolgate up applied them already)
        assert applied.returncode == 0 and "ACL bindings created" in applied.stdout, applied.stderr
    else:  # a Kafka without an authorizer refuses ACLs (SECURITY_DISABLED)
        assert applied.returncode != 0
