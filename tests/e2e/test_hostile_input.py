"""Nothing an agent sends can stop a stage, through the real broker and Postgres.

Each test sends what a producer with access to a topic could send, and checks that the stage
answered what can be answered, dead-lettered the rest, and never restarted: the same worker
processes, and the next good proposal on the same partition succeeds.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest

from toolgate.client import Proposed
from toolgate.schemas.codec import codec
from toolgate.schemas.models import ApprovalDecision, Principal, ToolProposal, Verdict
from toolgate.topics.catalog import Topics
from toolgate.topics.headers import edge_headers, new_traceparent
from toolgate.trust.agent_keys import AgentKeyring

from ..conftest import Pipeline, eventually
from .test_pipeline import errors_of, taxonomy

pytestmark = pytest.mark.timeout(180)

TOPICS = Topics()


def signed(pipeline: Pipeline, **fields: Any) -> ToolProposal:
    run_id = f"run_{uuid.uuid4().hex[:10]}"
    base: dict[str, Any] = {
        "call_id": f"call_{uuid.uuid4().hex}",
        "tenant_id": "acme",
        "principal": Principal(user_id="u", agent_id="cli", scopes=["invoices:read"]),
        "workflow_id": run_id,
        "run_id": run_id,
        "logical_operation_id": "op",
        "tool_name": "invoice.fetch",
        "arguments": '{"invoice_id": "inv_acme0001"}',
        "created_at_ms": int(time.time() * 1000),
    }
    return AgentKeyring(pipeline.home / "agents").signer("cli").sign(ToolProposal(**{**base, **fields}))


def publish(pipeline: Pipeline, proposal: ToolProposal, value: bytes | None = None, extra: Any = ()) -> Proposed:
    """Straight onto tool.proposals (partition 0); a Proposed to wait for its answer with."""
    from toolgate.trust.proposal_signing import digest

    start = pipeline.client._end_offsets("acme")
    c = codec()
    headers = edge_headers(new_traceparent(), proposal.call_id[:128], "acme", c.fingerprint_of(ToolProposal))
    value = c.encode(proposal) if value is None else value
    pipeline.client.publish_raw(TOPICS.proposals, proposal.run_id[:256].encode(), value, [*headers, *extra], 0)
    pipeline.client.flush()
    return Proposed(proposal.call_id, proposal.run_id, "", 0, start, "acme", digest(proposal))


def next_good_proposal_succeeds(pipeline: Pipeline) -> None:
    good = signed(pipeline)
    assert taxonomy(pipeline.wait(publish(pipeline, good), timeout=20)) == "SUCCESS"


def test_a_poison_attempts_header_stops_no_stage(pipeline: Pipeline, no_restarts: None) -> None:
    poisoned = signed(pipeline)
    answer = pipeline.wait(publish(pipeline, poisoned, extra=[("toolgate-attempts", b"x")]), timeout=20)
    assert taxonomy(answer) == "SUCCESS"  # the header is what its producer wrote: ignored
    # On the decisions topic, whose stage also runs the approvals' expiry sweep.
    decision = ApprovalDecision(
        decision_id=f"dec_{uuid.uuid4().hex}",
        approval_id="appr_nothing_waits_for_this",
        decision=Verdict.APPROVE,
        approver_id="alice",
        tool_name="payment.charge_card",
        tool_version="1.0.0",
        payload_hash="sha256:" + "0" * 64,
        decided_at_ms=0,
        expires_at_ms=0,
        signature=b"",
    )
    headers = [("toolgate-attempts", b"\xff\xfe"), ("traceparent", b"not a traceparent")]
    pipeline.insider.publish_raw(TOPICS.approvals_decisions, b"appr_x", codec().encode(decision), headers)
    pipeline.insider.flush()
    audited = eventually(
        lambda: pipeline.sql(
            "SELECT detail->>'code' FROM toolgate.audit_log WHERE detail->>'decision_id' = %s",
            (decision.decision_id,),
        )
    )
    assert audited == [("unknown_approval",)]
    next_good_proposal_succeeds(pipeline)


def test_a_proposal_beyond_the_size_limits_is_answered_out_of_bounds(pipeline: Pipeline, no_restarts: None) -> None:
    huge = signed(pipeline, workflow_id="w" * 900_000)
    answer = pipeline.wait(publish(pipeline, huge), timeout=30)
    assert taxonomy(answer) == "OUT_OF_BOUNDS"
    assert errors_of(answer) == [(None, "too_large"), ("workflow_id", "too_long")]
    assert answer["status"]["repairable"] is True
    next_good_proposal_succeeds(pipeline)


def test_a_proposal_whose_call_cannot_be_named_is_dead_lettered(pipeline: Pipeline, no_restarts: None) -> None:
    nameless = signed(pipeline, call_id="c" * 5000)
    publish(pipeline, nameless)
    letters = eventually(
        lambda: [
            r
            for r in json.loads(pipeline.cli("dlq", "list", "--json").stdout)
            if r["taxonomy_class"] == "OUT_OF_BOUNDS" and r["bytes"] > 5000 and r["stage"] == "validation"
        ]
    )
    assert len(letters) == 1 and "names no call" in letters[0]["reason"]
    next_good_proposal_succeeds(pipeline)


def test_argument_text_that_is_not_utf8_is_answered(pipeline: Pipeline, no_restarts: None) -> None:
    raw = b"\xff\xfe not UTF-8"
    proposal = signed(pipeline, arguments=raw.decode("utf-8", "surrogateescape"))  # signed over these bytes
    placeholder = proposal.model_copy(update={"arguments": "A" * len(raw)})
    value = codec().encode(placeholder).replace(b"A" * len(raw), raw)  # as a producer that is not Python writes it
    answer = pipeline.wait(publish(pipeline, proposal, value), timeout=20)
    assert (taxonomy(answer), errors_of(answer)) == ("SYNTACTIC_PARSE_FAIL", [(None, "invalid_utf8")])
    assert answer["tool_identity"]["call_id"] == proposal.call_id
    next_good_proposal_succeeds(pipeline)
