"""What validation and execution count of a round (workers/runtime/stage_metrics.py), from what
the round emitted, read back through an OpenTelemetry in-memory reader."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from toolgate.schemas.models import PayloadKind, TaxonomyClass
from toolgate.workers.runtime import span_attributes
from toolgate.workers.runtime.call_facts import GateFacts
from toolgate.workers.runtime.emit import Emit, Origin
from toolgate.workers.runtime.handler import Inbound
from toolgate.workers.runtime.results import outcome, result
from toolgate.workers.runtime.stage_metrics import CompensationMetrics, ValidationMetrics

from .factories import proposal, registry, stage_record

ORIGIN = Origin("proposals", 0, 7, None, [], PayloadKind.STAGE_ITEM)


@pytest.fixture(autouse=True)
def contracts() -> Iterator[None]:
    span_attributes.use_registry(registry())
    yield
    span_attributes.CONTRACTS.registry = None


def totals(reader: InMemoryMetricReader, name: str) -> dict[tuple[tuple[str, Any], ...], float]:
    data = reader.get_metrics_data()
    assert data is not None
    return {
        tuple(sorted((point.attributes or {}).items())): float(point.value)
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == name
        for point in metric.data.data_points
        if point.value
    }


def test_validation_counts_each_answered_proposal_by_its_verdicts_and_the_door_as_unchecked() -> None:
    reader = InMemoryMetricReader()
    metrics = ValidationMetrics(MeterProvider(metric_readers=[reader]).get_meter("test"))
    passed, repaired, denied, unproven = (
        proposal("invoice.fetch", "{}", tool_version="1.x", call_id=f"c{n}", repair_attempt=int(n == 1))
        for n in range(4)
    )
    out = Emit("validation")
    out.outcomes.update({"c0": "forwarded", "c1": "forwarded", "c2": "PERMISSION_DENIED"})  # c3 proved no one
    out.facts.update(
        {"c0": GateFacts("first", "valid", "valid"), "c1": GateFacts("repair", "valid", "valid", ("repaired",))}
    )
    metrics.record([Inbound(p, b"", ORIGIN) for p in (passed, repaired, denied, unproven)], out)
    tool = (("tool", "invoice.fetch"), ("version", "1.0.0"))
    counted = totals(reader, "tool.validation.proposals")
    assert counted == {
        tuple(sorted((*tool, ("attempt", "first"), ("schema", "valid"), ("semantic", "valid")))): 1,
        tuple(sorted((*tool, ("attempt", "repair"), ("schema", "valid"), ("semantic", "valid")))): 1,
        tuple(sorted((*tool, ("attempt", "first"), ("schema", "unchecked"), ("semantic", "unchecked")))): 1,
    }
    assert totals(reader, "tool.repair.loops") == {tuple(sorted((*tool, ("event", "repaired")))): 1}


def test_execution_counts_the_compensations_that_ran_by_how_they_ended() -> None:
    reader = InMemoryMetricReader()
    metrics = CompensationMetrics(MeterProvider(metric_readers=[reader]).get_meter("test"))
    contract = registry().resolve("invoice.void_draft", "1.x")
    undone, failed, refused, plain = (
        stage_record(contract, call_id=f"c{n}", compensation_of=None if n == 3 else "earlier") for n in range(4)
    )
    out = Emit("execution")
    for record, taxonomy in (
        (undone, TaxonomyClass.SUCCESS),
        (failed, TaxonomyClass.COMPENSATION_FAILED),
        (refused, TaxonomyClass.STALE_STATE),
        (plain, TaxonomyClass.SUCCESS),
    ):
        out.end(
            result(
                record.call,
                stage="execution",
                result_outcome=outcome(taxonomy),
                traceparent="",
                home_partition=0,
                now_ms=1,
            )
        )
    metrics.record([Inbound(r, b"", ORIGIN) for r in (undone, failed, refused, plain)], out)
    tool = (("tool", "invoice.void_draft"), ("version", "1.0.0"))
    assert totals(reader, "tool.compensations") == {
        tuple(sorted((*tool, ("result", "succeeded")))): 1,
        tuple(sorted((*tool, ("result", "failed")))): 1,
    }
