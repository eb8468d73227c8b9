"""What normalization counts for each call that ended (workers/runtime/call_metrics.py), read
back through an OpenTelemetry in-memory reader."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from toolgate.schemas.models import TaxonomyClass, Verification
from toolgate.workers.runtime import span_attributes
from toolgate.workers.runtime.call_metrics import CallMetrics
from toolgate.workers.runtime.results import outcome, result

from .factories import TRACEPARENT, registry, stage_record

T = TaxonomyClass


@pytest.fixture(autouse=True)
def contracts() -> Iterator[None]:
    span_attributes.use_registry(registry())
    yield
    span_attributes.CONTRACTS.registry = None


def counted(
    tool: str, taxonomy: TaxonomyClass, stage: str = "execution", calls: int = 1, **kwargs: Any
) -> dict[str, float]:
    """Each counter's total after `calls` calls of `tool` ended in `taxonomy`, in one round."""
    reader = InMemoryMetricReader()
    metrics = CallMetrics(MeterProvider(metric_readers=[reader]).get_meter("test"))
    call = stage_record(registry().resolve(tool, "1.x"))
    ended = result(
        call.call, stage=stage, result_outcome=outcome(taxonomy), traceparent="", home_partition=0, now_ms=1, **kwargs
    )
    metrics.record([ended] * calls)
    data = reader.get_metrics_data()
    assert data is not None
    totals: dict[str, float] = {}
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                points = list(metric.data.data_points)
                totals[metric.name] = sum(getattr(p, "value", getattr(p, "count", 0)) for p in points)
    return totals


@pytest.mark.parametrize(
    ("tool", "taxonomy", "kwargs", "expected"),
    [
        ("invoice.fetch", T.SUCCESS, {}, {"tool.invocation.count": 1, "tool.invocation.latency": 1}),
        ("invoice.fetch", T.TYPE_MISMATCH, {}, {"tool.schema.validation_failures": 1}),
        ("invoice.fetch", T.OBSERVATION_NORMALIZATION_FAIL, {}, {"tool.schema.validation_failures": 1}),
        ("invoice.fetch", T.SEMANTIC_INVALIDITY, {}, {"tool.schema.validation_failures": 0}),
        ("invoice.fetch", T.TIMEOUT, {}, {"tool.invocation.timeouts": 1, "tool.retry_budget.exhausted": 0}),
        # payment.charge_card allows 2 retries: a third attempt that times out has spent them.
        ("payment.charge_card", T.TIMEOUT, {"attempt_number": 3}, {"tool.retry_budget.exhausted": 1}),
        ("payment.charge_card", T.TIMEOUT, {"attempt_number": 2}, {"tool.retry_budget.exhausted": 0}),
        # A call that is its operation's third attempt is one retry (its second was another).
        ("payment.charge_card", T.SUCCESS, {"attempt_number": 3}, {"tool.invocation.retries": 1}),
        ("payment.charge_card", T.SUCCESS, {"attempt_number": 3}, {"tool.retry.attempts": 1}),
        ("payment.charge_card", T.SUCCESS, {"attempt_number": 1}, {"tool.retry.attempts": 0}),
        ("invoice.create_draft", T.IDEMPOTENCY_CONFLICT, {}, {"tool.retry.attempts": 1, "tool.invocation.retries": 0}),
        (
            "invoice.create_draft",
            T.SUCCESS,
            {"verification": Verification(post_action_verification_required=True)},
            {"tool.verification.required": 1},
        ),
        ("invoice.fetch", T.SUCCESS, {}, {"tool.verification.required": 0, "tool.traces": 1}),
        ("invoice.create_draft", T.SUCCESS, {"idempotency_hit": True}, {"tool.idempotency.replays": 1}),
        (
            "invoice.fetch",
            T.SUCCESS,
            {"verification": Verification(post_action_verification_required=True)},
            {"tool.mutation_class.violations": 1},
        ),
        (
            "invoice.create_draft",
            T.SUCCESS,
            {"verification": Verification(post_action_verification_required=True)},
            {"tool.mutation_class.violations": 0},
        ),
    ],
)
def test_what_one_ended_call_counts(
    tool: str, taxonomy: TaxonomyClass, kwargs: dict[str, Any], expected: dict[str, float]
) -> None:
    totals = counted(tool, taxonomy, **kwargs)
    for name, value in expected.items():
        assert totals.get(name, 0) == value, f"{name}: {totals.get(name)} != {value}"


def test_cost_is_counted_for_executed_calls_not_for_refusals_or_replays() -> None:
    assert "tool.invocation.cost" in counted("invoice.fetch", T.SUCCESS)
    assert "tool.invocation.cost" not in counted("invoice.fetch", T.TYPE_MISMATCH, stage="validation")
    assert "tool.invocation.cost" not in counted("invoice.create_draft", T.SUCCESS, idempotency_hit=True)


def test_the_rare_counters_start_at_zero_for_every_contract() -> None:
    totals = counted("invoice.fetch", T.SUCCESS)
    for name in ("tool.retry_budget.exhausted", "tool.mutation_class.violations", "tool.invocation.timeouts"):
        assert name in totals and totals[name] == 0


def test_a_round_adds_every_call_it_ended() -> None:
    one = counted("payment.charge_card", T.TIMEOUT, attempt_number=3)
    three = counted("payment.charge_card", T.TIMEOUT, attempt_number=3, calls=3)
    for name in ("tool.invocation.count", "tool.invocation.latency", "tool.invocation.timeouts"):
        assert three[name] == 3 * one[name] == 3
    assert three["tool.invocation.retries"] == 3 * one["tool.invocation.retries"] == 3
    assert three["tool.retry_budget.exhausted"] == 3
    assert three["tool.invocation.cost"] == 3 * one["tool.invocation.cost"]


def test_tools_no_contract_has_are_counted_as_one_unknown_series() -> None:
    reader = InMemoryMetricReader()
    metrics = CallMetrics(MeterProvider(metric_readers=[reader]).get_meter("test"))
    call = stage_record(registry().resolve("invoice.fetch", "1.0.0"))
    ended = result(
        call.call,
        stage="validation",
        result_outcome=outcome(T.TYPE_MISMATCH),
        traceparent="",
        home_partition=0,
        now_ms=1,
    )
    metrics.record([ended.model_copy(update={"tool_name": f"made.up_{n}"}) for n in range(50)])
    data = reader.get_metrics_data()
    assert data is not None
    counts = [
        dict(point.attributes or {})
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == "tool.invocation.count"
        for point in metric.data.data_points
    ]
    # One series, whatever names callers make up: a name is no label unless a contract has it.
    assert [(c["tool"], c["version"], c["side_effect_class"], c["lifecycle"]) for c in counts] == [
        ("unknown", "unknown", "unknown", "unknown")
    ]
    assert metrics._shapes == {}


def points(reader: InMemoryMetricReader, name: str) -> list[tuple[dict[str, Any], float]]:
    data = reader.get_metrics_data()
    assert data is not None
    return [
        (dict(point.attributes or {}), float(getattr(point, "value", getattr(point, "count", 0))))
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == name
        for point in metric.data.data_points
    ]


def total(reader: InMemoryMetricReader, name: str, **match: str) -> float:
    return sum(v for labels, v in points(reader, name) if all(labels.get(k) == m for k, m in match.items()))


HELD = outcome(T.CONFIRMATION_MISSING, code=202, is_error=False, fail_closed=False)
UNVERIFIED = outcome(T.TIMEOUT, code=202, retryable=False, fail_closed=False, next_action="await_verification")


@pytest.mark.parametrize(
    ("observations", "interims"),
    [
        ((HELD, outcome(T.SUCCESS)), {"approval_pending": 1}),  # held, then approved
        ((HELD, UNVERIFIED, outcome(T.SUCCESS)), {"approval_pending": 1, "outcome_unverified": 1}),  # verified
        ((UNVERIFIED, outcome(T.SUCCESS)), {"outcome_unverified": 1}),
    ],
)
def test_a_call_counts_once_at_its_final_observation(observations: tuple[Any, ...], interims: dict[str, int]) -> None:
    """Review 2026-11-28 row 18: a held call counted twice, a verified one three times, and its
    interim TIMEOUT as a timeout and an error. Each round here brings one observation."""
    reader = InMemoryMetricReader()
    metrics = CallMetrics(MeterProvider(metric_readers=[reader]).get_meter("test"))
    call = stage_record(registry().resolve("notify.send_email", "1.x"))
    for seen in observations:
        stage = "approval-wait" if seen is HELD else "execution"
        metrics.record(
            [result(call.call, stage=stage, result_outcome=seen, traceparent="", home_partition=0, now_ms=1)]
        )
    assert total(reader, "tool.invocation.count") == 1
    assert total(reader, "tool.invocation.count", taxonomy_class="SUCCESS", status="ok", stage="execution") == 1
    assert total(reader, "tool.invocation.count", status="error") == 0
    assert total(reader, "tool.invocation.timeouts") == 0
    assert total(reader, "tool.invocation.latency") == 1
    for kind, count in interims.items():
        assert total(reader, "tool.invocation.interim", kind=kind, tool="notify.send_email", tenant="acme") == count
    assert total(reader, "tool.invocation.interim") == sum(interims.values())


def test_a_result_normalization_could_not_observe_counts_as_the_failure_its_agent_got() -> None:
    reader = InMemoryMetricReader()
    metrics = CallMetrics(MeterProvider(metric_readers=[reader]).get_meter("test"))
    call = stage_record(registry().resolve("invoice.fetch", "1.x"))
    ended = result(
        call.call, stage="execution", result_outcome=outcome(T.SUCCESS), traceparent="", home_partition=0, now_ms=1
    )
    metrics.record([ended], {ended.call_id})
    assert total(reader, "tool.invocation.count", taxonomy_class="OBSERVATION_NORMALIZATION_FAIL") == 1
    assert total(reader, "tool.invocation.count", taxonomy_class="SUCCESS") == 0
    assert total(reader, "tool.schema.validation_failures", phase="output") == 1


def test_a_sampled_call_with_its_proposal_digest_has_a_complete_trace() -> None:
    reader = InMemoryMetricReader()
    metrics = CallMetrics(MeterProvider(metric_readers=[reader]).get_meter("test"))
    call = stage_record(registry().resolve("invoice.fetch", "1.x"), proposal_digest="d" * 64)
    sampled, unsampled = (
        result(
            call.call, stage="execution", result_outcome=outcome(T.SUCCESS), traceparent=tp, home_partition=0, now_ms=1
        )
        for tp in (TRACEPARENT, TRACEPARENT[:-2] + "00")
    )
    metrics.record([sampled, unsampled])
    assert total(reader, "tool.traces", complete="true") == 1
    assert total(reader, "tool.traces", complete="false", tool="invoice.fetch") == 1
