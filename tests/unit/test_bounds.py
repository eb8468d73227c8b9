"""Bounded effects and the mutation detector, their pure parts: the bounds a round's statements
get (workers/execution/bounds.py), what a statement a bound cut means, the quarantine gate of
policy, admission of a READ_ONLY HTTP tool, and the violation counter the MutationClassViolation
alert reads. No I/O; tests/integration/test_bounded_effects.py runs them on the real Postgres."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from tests.unit.factories import contracts, registry, stage_record, verdict_of
from toolgate.contracts.admission import ContractRefused, admit
from toolgate.contracts.budgets import load_budgets
from toolgate.contracts.contract import Contract
from toolgate.schemas.models import FieldError, TaxonomyClass
from toolgate.taxonomy import MUTATION_CLASS_VIOLATION, TOOL_QUARANTINED
from toolgate.workers.execution import bounds
from toolgate.workers.execution.effects import Failed, Job, failed
from toolgate.workers.policy.decision import Allow, Deny, Usage, decide, refs
from toolgate.workers.runtime import span_attributes
from toolgate.workers.runtime.call_metrics import CallMetrics
from toolgate.workers.runtime.results import outcome, result

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


def test_a_cut_read_of_a_target_answers_as_a_cut_of_the_calls_own_statement() -> None:
    """An approved call's target re-read under FOR UPDATE (tickets.py) is cut like its statement."""
    held = bounds.read_cut(job("invoice.void_draft", 0), bounds.Cut("55P03", LIMIT))
    assert (held.taxonomy, held.errors[0].code, held.final) == (T.STALE_STATE, "lock_timeout", False)
    assert "200 ms" in (held.errors[0].message or "")
    slow = bounds.read_cut(job("invoice.void_draft", 0), bounds.Cut("57014", LIMIT))
    assert (slow.taxonomy, slow.errors[0].code, slow.final) == (T.TIMEOUT, "statement_timeout", False)
    with pytest.raises(ValueError, match="23505"):
        bounds.read_cut(job("invoice.void_draft", 0), bounds.Cut("23505", LIMIT))


@pytest.mark.parametrize(("tool", "sqlstate"), [("invoice.create_draft", "25006"), ("invoice.fetch", "23505")])
def test_other_refusals_are_not_a_bounds_to_answer(tool: str, sqlstate: str) -> None:
    assert bounds.cut(job(tool, 0), sqlstate, LIMIT, {}) is None


def test_only_a_mutation_class_violation_quarantines() -> None:
    assert not bounds.violated(failed(T.POLICY_VIOLATION, "other", "x", final=True))
    assert not bounds.violated(None)


# --- the quarantine gate ---------------------------------------------------------------------


def decided(tool: str, quarantined: frozenset[tuple[str, str]], usage: Usage | None = None) -> Allow | Deny:
    c = registry().resolve(tool, "latest")
    record = stage_record(c)
    row = {"tenant_id": "acme", "status": "open", "currency": "USD", "amount_cents": 125000}
    facts = {(lookup, value): ({"id": value, **row},) for lookup, value in refs(record, c) if isinstance(value, str)}
    return decide(
        record,
        c,
        load_budgets(),
        facts,
        usage or Usage(),
        "event-1",
        0,
        "dev",
        quarantined,
        verdict=verdict_of(record, c),
    )


def test_a_quarantined_tool_version_runs_no_call_not_even_a_retry() -> None:
    held = frozenset({("invoice.fetch", "1.0.0")})
    for usage in (Usage(), Usage(counted={"event-1"})):
        denied = decided("invoice.fetch", held, usage)
        assert isinstance(denied, Deny)
        assert (denied.taxonomy_class, denied.errors[0].code) == (T.POLICY_VIOLATION, TOOL_QUARANTINED)
        assert denied.errors[0].field == "tool_version" and denied.finding == "quarantined"


def test_a_quarantine_holds_its_version_only() -> None:
    assert isinstance(decided("invoice.fetch", frozenset({("invoice.fetch", "0.9.0")})), Allow)
    assert isinstance(decided("invoice.fetch", frozenset()), Allow)


# --- admission of a READ_ONLY HTTP tool ------------------------------------------------------


def http_document(side_effect_class: str, method: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((REPO / "contracts/tools/notify.send_email/1.0.0.json").read_text())
    document = copy.deepcopy(document)
    document["contract"]["transactional"]["side_effect_class"] = side_effect_class
    document["binding"]["executor"]["method"] = method
    if side_effect_class == "READ_ONLY":  # a read is never keyed by its operation, and reads (contracts/honoured.py)
        document["contract"]["idempotency"]["required"] = False
        document["contract"]["transactional"]["semantics"] = "read_only"
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


# --- the counter the alert reads -------------------------------------------------------------


def violations(tool: str, code: str, idempotency_hit: bool = False) -> float:
    span_attributes.use_registry(registry())
    try:
        reader = InMemoryMetricReader()
        metrics = CallMetrics(MeterProvider(metric_readers=[reader]).get_meter("test"))
        call = stage_record(registry().resolve(tool, "latest")).call
        ended = result(
            call,
            stage="execution",
            result_outcome=outcome(T.POLICY_VIOLATION),
            traceparent="",
            home_partition=0,
            now_ms=1,
            errors=[FieldError(field=None, code=code, message="m")],
            idempotency_hit=idempotency_hit,
        )
        metrics.record([ended])
        data = reader.get_metrics_data()
        assert data is not None
        return sum(
            p.value  # type: ignore[union-attr]
            for r in data.resource_metrics
            for s in r.scope_metrics
            for m in s.metrics
            if m.name == "tool.mutation_class.violations"
            for p in m.data.data_points
            if dict(p.attributes or {}).get("tool") == tool
        )
    finally:
        span_attributes.CONTRACTS.registry = None


def test_a_read_only_tool_caught_writing_counts_one_violation() -> None:
    assert violations("invoice.fetch", MUTATION_CLASS_VIOLATION) == 1
    assert violations("invoice.fetch", MUTATION_CLASS_VIOLATION, idempotency_hit=True) == 0  # a copy, answered again
    assert violations("invoice.fetch", TOOL_QUARANTINED) == 0  # the refusals that follow are not violations


# --- what the executor takes for a lost connection ------------------------------------------


def test_a_statement_a_bound_cut_is_no_lost_connection() -> None:
    """psycopg calls both cuts OperationalError; taken for a lost connection, the whole
    transaction retried (forever, for a statement that always sleeps past its bound)."""
    from psycopg import OperationalError, errors

    from toolgate.workers.execution.executors import lost

    assert not lost(errors.QueryCanceled("statement timeout")) and not lost(errors.LockNotAvailable("lock timeout"))
    assert lost(OperationalError("server closed the connection unexpectedly"))
