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

from .factories import registry, stage_record

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
        ("payment.charge_card", T.SUCCESS, {"attempt_number": 3}, {"tool.invocation.retries": 2}),
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
    assert three["tool.invocation.retries"] == 3 * one["tool.invocation.retries"] == 6
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
