"""Approval-wait reads only the head of a call it forwards, and the whole of one that waits
(workers/approval/held.py)."""

from __future__ import annotations

from typing import Any

from tests.unit.factories import contracts, registry, stage_record
from toolgate.schemas.codec import codec
from toolgate.schemas.models import ExecutionResult, PayloadKind, StageHead, StageRecord, TaxonomyClass
from toolgate.settings import load_settings
from toolgate.workers.approval.held import AuthorizedHandler
from toolgate.workers.runtime.emit import Emit, Origin
from toolgate.workers.runtime.handler import Inbound

ORIGIN = Origin("authorized", 0, 7, None, [], PayloadKind.STAGE_ITEM)


def handler() -> AuthorizedHandler:
    return AuthorizedHandler(registry(), load_settings(use_runtime=False))


def inbound(**overrides: Any) -> Inbound[StageRecord | StageHead]:
    raw = codec().encode(stage_record(contracts()[0], **overrides))
    return Inbound(handler().decode(raw), raw, ORIGIN, traceparent="00-" + "1" * 32 + "-" + "2" * 16 + "-01")


def test_a_call_is_read_as_its_head_with_the_fields_of_its_record() -> None:
    record = stage_record(contracts()[0], required_approvals=2, approval_id="apr_1", home_partition=3)
    head = handler().decode(codec().encode(record))
    assert isinstance(head, StageHead)
    for name in StageHead.reads:
        _, _, inner = name.partition(".")
        if inner:
            assert getattr(head.call, inner) == getattr(record.call, inner)
        else:
            assert getattr(head, name) == getattr(record, name)


def test_a_call_that_needs_no_approval_goes_on_as_its_bytes_came() -> None:
    call, out = inbound(required_approvals=0, home_partition=2), Emit("approval-wait")
    assert handler()._forward([call], out) == []
    assert out.items == {("executable", 2): [call.raw]}
    assert out.outcomes == {"call_1": "forwarded"}


def test_a_call_that_waits_is_read_whole() -> None:
    call, out = inbound(required_approvals=2), Emit("approval-wait")
    [(whole, contract)] = handler()._forward([call], out)
    assert whole.model == codec().decode(call.raw, StageRecord)
    assert (whole.raw, whole.traceparent, contract.name) == (call.raw, call.traceparent, contracts()[0].name)
    assert not out.items and not out.dead_letters


def test_a_call_that_waits_whose_record_is_whole_only_in_its_head_is_dead_lettered() -> None:
    good = inbound(required_approvals=2)
    call, out = Inbound(good.model, good.raw[:-3], ORIGIN), Emit("approval-wait")
    assert handler()._forward([call], out) == []
    [dead] = out.dead_letters
    assert dead.value == call.raw and dead.taxonomy_class == TaxonomyClass.SYNTACTIC_PARSE_FAIL
    assert dead.call_id == "call_1"


def test_a_call_that_failed_here_is_answered_fail_closed_from_its_whole_record() -> None:
    call, out = inbound(required_approvals=0, home_partition=1), Emit("approval-wait")
    handler().on_failure(call, "boom", out)
    [raw] = out.items[("results", 1)]
    result = codec().decode(raw, ExecutionResult)
    assert result.call_id == "call_1" and result.outcome.taxonomy_class == TaxonomyClass.UNKNOWN_ERROR
