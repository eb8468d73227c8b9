"""Bounded effects, their pure parts: the bounds a round's statements get
(workers/execution/bounds.py), what a statement a bound cut means, and admission of a
READ_ONLY HTTP tool. No I/O; tests/integration/test_bounded_effects.py runs them on the real Postgres."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests.unit.factories import contracts, registry, stage_record
from toolgate.contracts.admission import ContractRefused, admit
from toolgate.contracts.contract import Contract
from toolgate.schemas.models import TaxonomyClass
from toolgate.taxonomy import MUTATION_CLASS_VIOLATION
from toolgate.workers.execution import bounds
from toolgate.workers.execution.effects import Failed, Job, failed

T = TaxonomyClass
REPO = Path(__file__).resolve().parents[2]


def job(tool: str, deadline_ms: int) -> Job:
    contract = registry().resolve(tool, "latest")
    return Job(stage_record(contract), contract, "k", deadline_ms)


# --- the bounds ------------------------------------------------------------------------------


def test_statements_that_run_together_share_the_least_time_left() -> None:
    jobs = [job("invoice.fetch", 10_500), job("invoice.create_draft", 10_300), job("invoice.fetch", 12_000)]
    assert bounds.limits(jobs, 10_000) == bounds.Limits(300, 150)


@pytest.mark.parametrize(
    ("deadline", "expected"),
    [
        (10_000, bounds.Limits(1, 1)),  # no time left: the least bound there is, never 0 (no bound)
        (9_000, bounds.Limits(1, 1)),
        (10_001, bounds.Limits(1, 1)),
        (2**62, bounds.Limits(2**31 - 1, (2**31 - 1) // 2)),  # the most Postgres takes
    ],
)
def test_a_bound_is_never_zero_nor_more_than_postgres_takes(deadline: int, expected: bounds.Limits) -> None:
    assert bounds.limits([job("invoice.fetch", deadline)], 10_000) == expected


def test_a_read_only_tools_statements_run_read_only_and_no_other_tools() -> None:
    read_only = {c.name for c in contracts() if bounds.read_only(Job(stage_record(c), c, "k", 0))}
    assert read_only == {"invoice.fetch", "invoice.tax_estimate"}


LIMIT = bounds.Limits(400, 200)


def test_a_statement_cut_by_its_timeout_is_a_retryable_timeout() -> None:
    cut = bounds.cut(job("invoice.create_draft", 0), "57014", LIMIT, {})
    assert isinstance(cut, Failed)
    assert (cut.taxonomy, cut.errors[0].code, cut.final) == (T.TIMEOUT, "statement_timeout", False)
    assert "400 ms" in (cut.errors[0].message or "") and "nothing was changed" in (cut.errors[0].message or "")


def test_a_lock_wait_past_its_bound_is_stale_state_and_nothing_ran() -> None:
    cut = bounds.cut(job("invoice.void_draft", 0), "55P03", LIMIT, {})
    assert isinstance(cut, Failed)
    assert (cut.taxonomy, cut.errors[0].code, cut.final) == (T.STALE_STATE, "lock_timeout", False)
    assert "200 ms" in (cut.errors[0].message or "")


def test_a_write_in_a_read_only_tool_is_a_mutation_class_violation_the_contract_cannot_rename() -> None:
    cut = bounds.cut(job("invoice.fetch", 0), "25006", LIMIT, {"25006": "UNKNOWN_ERROR"})
    assert isinstance(cut, Failed)
    assert (cut.taxonomy, cut.errors[0].code, cut.final) == (T.POLICY_VIOLATION, MUTATION_CLASS_VIOLATION, True)
    assert bounds.violated(cut)


def test_a_contract_may_name_another_class_for_a_timeout() -> None:
    cut = bounds.cut(job("invoice.create_draft", 0), "57014", LIMIT, {"57014": "DEPENDENCY_UNAVAILABLE"})
    assert isinstance(cut, Failed) and cut.taxonomy is T.DEPENDENCY_UNAVAILABLE and not cut.final
    cut = bounds.cut(job("invoice.create_draft", 0), "57014", LIMIT, {"57014": "NO_SUCH_CLASS"})
    assert isinstance(cut, Failed) and cut.taxonomy is T.TIMEOUT


@pytest.mark.parametrize(("tool", "sqlstate"), [("invoice.create_draft", "25006"), ("invoice.fetch", "23505")])
def test_other_refusals_are_not_a_bounds_to_answer(tool: str, sqlstate: str) -> None:
    assert bounds.cut(job(tool, 0), sqlstate, LIMIT, {}) is None


def test_only_a_mutation_class_violation_quarantines() -> None:
    assert not bounds.violated(failed(T.POLICY_VIOLATION, "other", "x", final=True))
    assert not bounds.violated(None)


# --- admission of a READ_ONLY HTTP tool ------------------------------------------------------


def http_document(side_effect_class: str, method: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((REPO / "contracts/tools/notify.send_email/1.0.0.json").read_text())
    document = copy.deepcopy(document)
    document["contract"]["transactional"]["side_effect_class"] = side_effect_class
    document["binding"]["executor"]["method"] = method
    if side_effect_class == "READ_ONLY":  # a read is never keyed by its operation (contracts/honoured.py)
        document["contract"]["idempotency"]["required"] = False
    return document


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
def test_a_read_only_http_tool_with_a_writing_method_is_refused_naming_the_field(method: str) -> None:
    with pytest.raises(ContractRefused) as refused:
        admit(http_document("READ_ONLY", method), "notify.send_email/1.0.0.json")
    said = str(refused.value)
    assert f"binding.executor.method of notify.send_email 1.0.0: {method} is a writing method" in said
    assert "transactional.side_effect_class is READ_ONLY" in said


def test_a_read_only_http_tool_may_get_and_a_writing_one_may_post() -> None:
    assert isinstance(admit(http_document("READ_ONLY", "GET"), "notify.send_email/1.0.0.json"), Contract)
    assert isinstance(admit(http_document("LOW_RISK_INTERNAL", "POST"), "notify.send_email/1.0.0.json"), Contract)
