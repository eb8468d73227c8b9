"""An effect in parts (workers/execution/parts.py): every row of its table, and what execution's
`conclude` and reconciliation's `complete` make of it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import pytest

from tests.unit.factories import TRACEPARENT, registry, stage_record
from toolgate.contracts.contract import Contract
from toolgate.contracts.honoured import problems
from toolgate.schemas.models import TaxonomyClass
from toolgate.states import KeyStatus
from toolgate.workers.execution import decision, parts, pending
from toolgate.workers.execution import idempotency as idem
from toolgate.workers.execution.effects import Done, Job

NOW = 1_700_000_100_000
BULK = registry().get("notify.send_bulk", "1.0.0")
ANNOUNCE = registry().get("notify.publish_announcement", "1.0.0")
EMAIL = registry().get("notify.send_email", "1.0.0")

SENT = {"index": 0, "to": "a@x.example", "ok": True, "message_id": "msg_1"}
BOUNCED = {
    "index": 1,
    "to": "b@x.example",
    "ok": False,
    "error": {"code": "recipient_rejected", "message": "refused"},
}
POSTED = {"step": "post", "ok": True}
NOT_NOTIFIED = {"step": "notify", "ok": False, "error": {"code": "mail_relay_down", "message": "down"}}


@dataclass(frozen=True)
class Row:
    id: str
    contract: Contract
    data: dict[str, Any]
    taxonomy: TaxonomyClass
    status: KeyStatus
    codes: tuple[str, ...] = ()


ROWS = [
    Row("no-parts", EMAIL, {"message_id": "m", "status": "sent"}, TaxonomyClass.SUCCESS, KeyStatus.COMPLETED),
    Row("items-all-sent", BULK, {"results": [SENT]}, TaxonomyClass.SUCCESS, KeyStatus.COMPLETED),
    Row(
        "items-some-failed",
        BULK,
        {"results": [SENT, BOUNCED]},
        TaxonomyClass.PARTIAL_SUCCESS,
        KeyStatus.COMPLETED,
        ("recipient_rejected",),
    ),
    Row(
        "items-all-failed",
        BULK,
        {"results": [BOUNCED]},
        TaxonomyClass.SEMANTIC_INVALIDITY,
        KeyStatus.FAILED_FINAL,
        ("recipient_rejected",),
    ),
    Row(
        "items-all-failed-retryable",
        BULK,
        {"results": [{**BOUNCED, "retryable": True}]},
        TaxonomyClass.DEPENDENCY_UNAVAILABLE,
        KeyStatus.FAILED_RETRYABLE,
        ("recipient_rejected",),
    ),
    Row(
        "no-parts-in-answer",
        BULK,
        {"sent": 2},
        TaxonomyClass.OBSERVATION_NORMALIZATION_FAIL,
        KeyStatus.COMPLETED,
        ("parts_missing",),
    ),
    Row(
        "steps-all-done", ANNOUNCE, {"post_id": "post_1", "steps": [POSTED]}, TaxonomyClass.SUCCESS, KeyStatus.COMPLETED
    ),
    Row(
        "second-step-failed",
        ANNOUNCE,
        {"post_id": "post_1", "steps": [POSTED, NOT_NOTIFIED]},
        TaxonomyClass.COMPENSATION_REQUIRED,
        KeyStatus.COMPLETED,
        ("mail_relay_down", "compensation_required"),
    ),
    Row(
        "first-step-failed",
        ANNOUNCE,
        {"post_id": "post_1", "steps": [{**NOT_NOTIFIED, "step": "post"}]},
        TaxonomyClass.SEMANTIC_INVALIDITY,
        KeyStatus.FAILED_FINAL,
        ("mail_relay_down",),
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_judge(row: Row) -> None:
    judged = parts.judge(row.contract, {"title": "t", "body": "b"}, row.data)
    assert (judged.outcome.taxonomy_class, judged.status) == (row.taxonomy, row.status)
    assert tuple(e.code for e in judged.errors) == row.codes


def test_a_partial_success_keeps_every_items_result_and_names_each_failed_one() -> None:
    judged = parts.judge(BULK, {}, {"results": [SENT, BOUNCED]})
    assert judged.data == {"results": [SENT, BOUNCED]}
    assert [(e.field, e.code) for e in judged.errors] == [("results[1]", "recipient_rejected")]
    assert judged.outcome.code == 207 and judged.outcome.retryable is False


def test_compensation_required_names_the_compensation_and_its_arguments() -> None:
    judged = parts.judge(ANNOUNCE, {"title": "t", "body": "b"}, {"post_id": "post_1", "steps": [POSTED, NOT_NOTIFIED]})
    assert judged.data is not None
    assert judged.data["compensation"] == {"tool": "notify.retract_announcement", "arguments": {"post_id": "post_1"}}
    assert judged.outcome.fail_closed is True and judged.outcome.next_action == "compensate_or_escalate"
    assert "notify.retract_announcement" in judged.errors[-1].message


def _job(contract: Contract) -> Job:
    r = stage_record(contract, {"title": "t", "body": "b"} if contract is ANNOUNCE else None)
    return Job(r, contract, "k", NOW + 5000)


def test_execution_and_reconciliation_conclude_alike() -> None:
    data = {"post_id": "post_1", "steps": [POSTED, NOT_NOTIFIED]}
    job = _job(ANNOUNCE)
    concluded = decision.conclude(job, TRACEPARENT, idem.Execute(1), False, Done(data), NOW)
    assert (concluded.result.outcome.taxonomy_class, concluded.status) == (
        TaxonomyClass.COMPENSATION_REQUIRED,
        KeyStatus.COMPLETED,
    )
    steps = pending.complete(pending.Pending(job), data, "reconciliation", NOW)
    try:
        next(steps)
        raise AssertionError("publish_announcement has no after_effect to ask for")
    except StopIteration as stop:
        settled = stop.value
    assert settled.status is KeyStatus.COMPLETED
    assert settled.result.outcome == concluded.result.outcome
    assert settled.result.data == concluded.result.data


def test_steps_without_a_compensation_are_refused_at_admission() -> None:
    document = {**ANNOUNCE.document, "transactional": {**ANNOUNCE.document["transactional"], "compensation_tool": None}}
    binding = {k: v for k, v in ANNOUNCE.binding.items() if k != "compensation"}
    refused = problems(dataclasses.replace(ANNOUNCE, document=document, binding=binding))
    assert [p.split(" of ")[0] for p in refused] == ["transactional.compensation_tool"] * 2
