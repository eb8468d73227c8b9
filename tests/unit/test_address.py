"""An edge record's address (topics/headers.py `Address`): its key and headers, built once from
the call it is about, and the same whether a round produces the record (workers/runtime/emit.py)
or an outbox row holds it for the relay (workers/runtime/outbox.py)."""

from __future__ import annotations

from tests.unit.factories import sample_models
from toolgate.schemas.codec import codec
from toolgate.schemas.models import ApprovalRequest, ExecutionResult, StageRecord
from toolgate.topics.headers import PROPOSAL_DIGEST, Address, edge_headers, header
from toolgate.workers.runtime import outbox
from toolgate.workers.runtime.emit import Emit

TRACE = "00-" + "1" * 32 + "-" + "2" * 16 + "-01"


def test_an_address_of_a_call_names_its_call_and_tenant_under_the_key_given() -> None:
    call = sample_models()[StageRecord].call
    address = Address.of(call, TRACE, key="appr_1")
    assert address == Address("appr_1", TRACE, call.call_id, call.tenant_id)
    fingerprint = codec().fingerprint_of(ApprovalRequest)
    assert address.headers(fingerprint) == edge_headers(TRACE, call.call_id, call.tenant_id, fingerprint)


def test_a_round_and_an_outbox_row_send_the_same_record_to_an_address() -> None:
    packet = sample_models()[ApprovalRequest]
    call = sample_models()[StageRecord].call
    address = Address.of(call, TRACE, key="appr_1")
    out = Emit("approval")
    out.record("tool.approvals.requested.acme", packet, address)
    row = outbox.record("approvals_requested", packet, address, tenant_topic=True)
    [sent] = out.records
    assert (sent.key, sent.value) == (row.key, row.payload) == (b"appr_1", codec().encode(packet))
    assert [(k, v.decode()) for k, v in sent.headers] == list(row.headers)
    assert row.tenant == call.tenant_id
    assert outbox.record("approvals_requested", packet, address).tenant is None


def test_an_observation_s_address_carries_the_digest_it_answers_and_no_other_record_s_does() -> None:
    res = sample_models()[ExecutionResult]
    answering = Address.of(res, TRACE, key=res.run_id, proposal_digest="sha256:ab")
    plain = Address.of(res, TRACE, key=res.run_id)
    fingerprint = codec().fingerprint_of(ExecutionResult)
    assert header(answering.headers(fingerprint), PROPOSAL_DIGEST) == "sha256:ab"
    assert header(plain.headers(fingerprint), PROPOSAL_DIGEST) is None
