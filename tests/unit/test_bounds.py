"""Bounded effects, their pure parts: the bounds a round's statements get
(workers/execution/bounds.py) and what a statement a bound cut means. No I/O;
tests/integration/test_bounded_effects.py runs them on the real Postgres."""

from __future__ import annotations

import pytest

from tests.unit.factories import contracts, registry, stage_record
from toolgate.schemas.models import TaxonomyClass
from toolgate.taxonomy import MUTATION_CLASS_VIOLATION
from toolgate.workers.execution import bounds
from toolgate.workers.execution.effects import Failed, Job, failed

T = TaxonomyClass


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
