"""Shared builders for toolgate's unit tests: wire models, contracts, hypothesis settings."""

from __future__ import annotations

import copy
import datetime as dt
import hashlib
import io
import json
from functools import cache
from typing import Any

from fastavro import schemaless_writer
from fastavro.schema import load_schema
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from toolgate.contracts.cedar_policy import CedarPolicy, load_cedar
from toolgate.contracts.contract import Contract
from toolgate.contracts.registry import Registry, load_registry
from toolgate.schemas.codec import MARKER, schema_fingerprint
from toolgate.schemas.documents import AVRO_DIR
from toolgate.schemas.hashing import idempotency_key_for, provider_key, request_hash
from toolgate.schemas.models import (
    ApprovalDecision,
    ApprovalRequest,
    Call,
    DeadLetter,
    ExecutionMetadata,
    ExecutionResult,
    FieldError,
    Header,
    Observation,
    ObservationError,
    ObservationStatus,
    Outcome,
    PayloadKind,
    Principal,
    ResultPayload,
    StageBatch,
    StageDecision,
    StageRecord,
    TaxonomyClass,
    ToolIdentity,
    ToolProposal,
    Verdict,
    Verification,
)
from toolgate.schemas.wire import compact_json
from toolgate.workers.policy.case import Verdict as PolicyVerdict
from toolgate.workers.policy.cedar import Ask, judge

# No example database: the unit run must not write outside tests/unit.
FAST = settings(max_examples=100, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
FAST_FEW = settings(FAST, max_examples=50)

TRACEPARENT = "00-0123456789abcdef0123456789abcdef-0123456789abcdef-01"
ALL_SCOPES = ["invoices:read", "invoices:write", "notify:send", "payments:charge"]

JSON_SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=12), children, max_size=5),
    max_leaves=25,
)

# The day the validation decisions are judged on: before every shipped contract's sunset date.
TODAY = dt.date(2026, 11, 1)


@cache
def registry() -> Registry:
    return load_registry()


@cache
def shipped_cedar() -> CedarPolicy:
    """The shipped Cedar policy set (contracts/cedar/), admitted against the shipped contracts."""
    return load_cedar(registry())


def verdict_of(
    record: StageRecord, contract: Contract, environment: str = "dev", now_ms: int = 0, cedar: CedarPolicy | None = None
) -> PolicyVerdict:
    """Cedar's verdict on one call (the shipped set unless `cedar`), as the policy stage judges it."""
    (verdict,) = judge(cedar or shipped_cedar(), [Ask(record, contract, environment, now_ms, {}, {})], {})
    return verdict


def draft_key(key: str, tenant: str = "acme", version: str | None = None) -> str:
    """The key invoice.create_draft stores with a draft (demo.invoices.operation_key) for the
    caller's idempotency key `key`: ctx.operation_key, bound to the tenant, tool and version
    (`version` None: the one `latest` resolves to)."""
    version = version or registry().resolve("invoice.create_draft", "latest").version
    return provider_key(tenant, "invoice.create_draft", version, key)


def draft_id(key: str, tenant: str = "acme", version: str | None = None) -> str:
    """The invoice id invoice.create_draft gives the draft of the caller's key `key`."""
    return "inv_" + hashlib.md5(draft_key(key, tenant, version).encode()).hexdigest()[:20]


def contracts() -> list[Contract]:
    return sorted(registry(), key=lambda c: (c.name, c.version))


def first_example(contract: Contract) -> dict[str, Any]:
    return copy.deepcopy(contract.document["affordance"]["examples"][0]["arguments"])


def principal(scopes: list[str] | None = None) -> Principal:
    return Principal(user_id="user_1", agent_id="agent_1", scopes=list(ALL_SCOPES if scopes is None else scopes))


def proposal(tool_name: str, arguments: Any, *, tool_version: str = "latest", **overrides: Any) -> ToolProposal:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    fields: dict[str, Any] = dict(
        call_id="call_1",
        tenant_id="acme",
        principal=principal(),
        workflow_id="wf_1",
        run_id="run_1",
        logical_operation_id="op_1",
        tool_name=tool_name,
        tool_version=tool_version,
        arguments=text,
        created_at_ms=1_700_000_000_000,
    )
    fields.update(overrides)
    return ToolProposal(**fields)


CALL_FIELDS = frozenset(Call.model_fields)


def record_of(**flat: Any) -> StageRecord:
    """A StageRecord from flat fields, as release 0.1.0 had them: the stage's own, the rest its
    call's, whose idempotency key and request hash are derived as validation derives them
    unless given (the key given is the caller's)."""
    stage = {name: value for name, value in flat.items() if name not in CALL_FIELDS}
    call = {name: value for name, value in flat.items() if name in CALL_FIELDS}
    return StageRecord(**stage, call=Call(**_derived(call, call.get("idempotency_key"))))


def changed(record: StageRecord, **changes: Any) -> StageRecord:
    """`record` with `changes`, by flat names as `record_of` takes them: a derived key and the
    request hash follow the fields they are derived from, unless given."""
    stage = {name: value for name, value in changes.items() if name not in CALL_FIELDS}
    call = {name: value for name, value in changes.items() if name in CALL_FIELDS}
    if call:
        fields = {**record.call.__dict__, **call}
        fields.pop("_wire", None)
        derived_key = record.call.idempotency_key.startswith("tg_") and "idempotency_key" not in call
        caller_key = None if derived_key else fields["idempotency_key"]
        if "request_hash" not in call:
            fields.pop("request_hash")
        stage["call"] = Call(**_derived(fields, caller_key))
    return record.model_copy(update=stage)


def _derived(call: dict[str, Any], caller_key: str | None) -> dict[str, Any]:
    p = call["principal"]
    user = p.user_id if isinstance(p, Principal) else p["user_id"]
    call["idempotency_key"] = idempotency_key_for(caller_key, call, user)
    call.setdefault(
        "request_hash", request_hash(call["tenant_id"], call["tool_name"], call["tool_version"], call["payload_hash"])
    )
    return call


def as_released_0_1(record: StageRecord) -> bytes:
    """`record` as release 0.1.0 wrote it (single-object encoded): its call's fields its own, with
    no request hash, and the call's key as the caller's (0.1.0 derived a missing one)."""
    old = load_schema(str(AVRO_DIR / "released" / "0.1.0" / "toolgate.StageRecord.avsc"))
    wire = record.model_dump()
    call = wire.pop("call")
    del call["request_hash"]
    call["arguments"] = compact_json(call["arguments"])
    buf = io.BytesIO()
    schemaless_writer(buf, old, {**wire, **call})
    return MARKER + schema_fingerprint(old) + buf.getvalue()


def stage_record(contract: Contract, arguments: dict[str, Any] | None = None, **overrides: Any) -> StageRecord:
    fields: dict[str, Any] = dict(
        call_id="call_1",
        traceparent=TRACEPARENT,
        home_partition=0,
        tenant_id="acme",
        principal=principal(),
        workflow_id="wf_1",
        run_id="run_1",
        logical_operation_id="op_1",
        tool_name=contract.name,
        tool_version=contract.version,
        arguments=first_example(contract) if arguments is None else arguments,
        payload_hash="sha256:" + "0" * 64,
        created_at_ms=1_700_000_000_000,
    )
    fields.update(overrides)
    return record_of(**fields)


def job_record(contract: Contract, arguments: dict[str, Any]) -> StageRecord:
    """The record of an executor's job: `contract`'s call with `arguments`, of call c1 by tenant
    acme, and nothing an executor does not read (no trace, an opaque payload hash)."""
    return stage_record(
        contract,
        arguments,
        call_id="c1",
        traceparent="",
        principal=Principal(user_id="u", agent_id="a"),
        workflow_id="w",
        run_id="r",
        logical_operation_id="op",
        payload_hash="sha256:x",
        created_at_ms=0,
    )


def sample_models() -> dict[type, Any]:
    """One fully populated instance of every top-level wire model (optional fields set)."""
    p = principal()
    outcome = Outcome(
        taxonomy_class=TaxonomyClass.RATE_LIMITED,
        code=429,
        is_error=True,
        retryable=True,
        repairable=False,
        requires_approval=False,
        fail_closed=False,
        next_action="retry_after_delay",
        retry_after_ms=1500,
    )
    verification = Verification(
        post_action_verification_required=True,
        target_state_reference="invoice:inv_1",
        expected_state={"status": "draft", "nested": {"n": [1, 2.5, None, True]}},
        delay_seconds=5,
    )
    record = record_of(
        call_id="call_1",
        traceparent=TRACEPARENT,
        home_partition=3,
        tenant_id="acme",
        principal=p,
        workflow_id="wf_1",
        run_id="run_1",
        logical_operation_id="op_1",
        tool_name="invoice.fetch",
        tool_version="1.0.0",
        arguments={"invoice_id": "inv_acme0001", "unicode": "é✓😀", "n": [1, {"k": None}]},
        payload_hash="sha256:" + "a" * 64,
        idempotency_key="idem-1",
        deadline_ms=1_800_000_000_000,
        repair_attempt=2,
        dry_run=True,
        created_at_ms=1_700_000_000_000,
        required_approvals=2,
        approval_id="appr_1",
        approvers=["alice", "bob"],
        attempt=3,
        warnings=["w1"],
        decisions=[
            StageDecision(stage="validation", outcome="pass", detail="ok", at_ms=1),
            StageDecision(stage="policy", outcome="allow", at_ms=2),
        ],
    )
    return {
        ToolProposal: ToolProposal(
            call_id="call_1",
            tenant_id="acme",
            principal=p,
            workflow_id="wf_1",
            run_id="run_1",
            logical_operation_id="op_1",
            tool_name="invoice.fetch",
            tool_version="1.x",
            arguments='{"invoice_id": "inv_acme0001"} not even json',
            idempotency_key="k",
            deadline_ms=123,
            repair_attempt=1,
            dry_run=True,
            created_at_ms=1_700_000_000_000,
        ),
        StageRecord: record,
        ExecutionResult: ExecutionResult(
            call_id="call_1",
            traceparent=TRACEPARENT,
            home_partition=1,
            tenant_id="acme",
            principal=p,
            workflow_id="wf_1",
            run_id="run_1",
            tool_name="invoice.fetch",
            tool_version="1.0.0",
            stage="execution",
            outcome=outcome,
            data={"x": 1, "y": [True, None]},
            errors=[
                FieldError(field="a.b[0]", message="m", code="c", expected="e", actual="x"),
                FieldError(message="only message", code="c2"),
            ],
            warnings=["careful"],
            idempotency_hit=True,
            attempt_number=4,
            verification=verification,
            approval_id="appr_1",
            created_at_ms=1_700_000_000_000,
            completed_at_ms=1_700_000_000_500,
        ),
        StageBatch: StageBatch(stage="validation", source_partition=7, items=[b"", b"\x00\xff", b"abc" * 100]),
        Observation: Observation(
            tool_identity=ToolIdentity(name="invoice.fetch", version="1.0.0", call_id="call_1"),
            execution_metadata=ExecutionMetadata(
                timestamp="2024-01-01T00:00:00.000Z",
                latency_ms=5,
                idempotency_hit=False,
                trace_id="0" * 32,
                attempt_number=1,
            ),
            status=ObservationStatus(
                code=200,
                is_error=False,
                taxonomy_class=TaxonomyClass.SUCCESS,
                retryable=False,
                repairable=False,
                requires_approval=False,
                fail_closed=False,
            ),
            result_payload=ResultPayload(
                data={"ok": True}, errors=[ObservationError(field=None, message="m", code="c")], warnings=["w"]
            ),
            verification=verification,
        ),
        ApprovalRequest: ApprovalRequest(
            approval_id="appr_1",
            call_id="call_1",
            trace_id="0" * 32,
            tenant_id="acme",
            run_id="run_1",
            requested_by=p,
            tool_name="payment.charge_card",
            tool_version="1.0.0",
            action="Charge",
            consequence="money moves",
            arguments={"invoice_id": "inv_acme0002", "amount_cents": 5, "currency": "USD"},
            before_state={"status": "open"},
            expected_after_state={"charge": "succeeded"},
            risk_class="CRITICAL_MUTATION",
            payload_hash="sha256:" + "b" * 64,
            idempotency_fingerprint="f" * 16,
            required_approvals=2,
            approver_groups=["finance"],
            compensation="refund",
            rejection_path="nothing runs",
            created_at_ms=1,
            expires_at_ms=2,
        ),
        ApprovalDecision: ApprovalDecision(
            decision_id="dec_1",
            approval_id="appr_1",
            decision=Verdict.DENY,
            approver_id="alice",
            tool_name="payment.charge_card",
            tool_version="1.0.0",
            payload_hash="sha256:" + "b" * 64,
            reason="no",
            decided_at_ms=1,
            expires_at_ms=2,
            signature=bytes(range(64)),
        ),
        DeadLetter: DeadLetter(
            dead_letter_id="dl_1",
            call_id="call_1",
            stage="policy",
            source_topic="tool.proposals",
            source_partition=2,
            source_offset=2**40,
            payload_kind=PayloadKind.STAGE_ITEM,
            key=b"run_1",
            value=b"\xc3\x01garbage",
            headers=[Header(key="traceparent", value=TRACEPARENT.encode()), Header(key="empty")],
            taxonomy_class=TaxonomyClass.UNKNOWN_ERROR,
            reason="boom",
            attempts=3,
            dead_lettered_at_ms=5,
        ),
    }


def minimal_models() -> dict[type, Any]:
    """Instances with every optional field left at its default."""
    p = Principal(user_id="u", agent_id="a")
    return {
        ToolProposal: ToolProposal(
            call_id="c",
            tenant_id="t",
            principal=p,
            workflow_id="w",
            run_id="r",
            logical_operation_id="l",
            tool_name="x",
            tool_version="latest",
            arguments="",
            created_at_ms=0,
        ),
        StageRecord: record_of(
            call_id="c",
            traceparent="",
            home_partition=0,
            tenant_id="t",
            principal=p,
            workflow_id="w",
            run_id="r",
            logical_operation_id="l",
            tool_name="x",
            tool_version="1.0.0",
            arguments={},
            payload_hash="h",
            created_at_ms=0,
        ),
        StageBatch: StageBatch(stage="s", source_partition=0, items=[]),
        DeadLetter: DeadLetter(
            dead_letter_id="d",
            stage="s",
            source_topic="t",
            source_partition=0,
            source_offset=0,
            payload_kind=PayloadKind.RECORD,
            value=b"",
            taxonomy_class=TaxonomyClass.SUCCESS,
            reason="r",
            dead_lettered_at_ms=0,
        ),
    }


TOP_LEVEL = [
    ToolProposal,
    StageRecord,
    ExecutionResult,
    StageBatch,
    Observation,
    ApprovalRequest,
    ApprovalDecision,
    DeadLetter,
]
