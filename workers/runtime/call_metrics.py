"""The seeds' per-invocation metrics (tool-contract chapter, "Metrics"), recorded where every
call ends: normalization, once per ExecutionResult, whichever stage produced it.

| instrument (OpenTelemetry) | Prometheus | labels |
|---|---|---|
| tool.invocation.count | tool_invocation_count_total | tool, version, tenant, side_effect_class, |
| | | taxonomy_class, status (ok, error), lifecycle (active, deprecated, ...) |
| tool.invocation.latency (ms) | tool_invocation_latency_milliseconds | tool, version, timeout_class |
| tool.invocation.cost | tool_invocation_cost_total | tool, version, cost_category, currency |
| tool.invocation.retries | tool_invocation_retries_total | tool, version |
| tool.invocation.timeouts | tool_invocation_timeouts_total | tool, version, timeout_class |
| tool.idempotency.replays | tool_idempotency_replays_total | tool, side_effect_class |
| tool.schema.validation_failures | tool_schema_validation_failures_total | tool, phase (input, output) |
| tool.retry_budget.exhausted | tool_retry_budget_exhausted_total | tool, version |
| tool.mutation_class.violations | tool_mutation_class_violations_total | tool, version |

The seeds' rates (timeout rate, idempotency replay rate, schema validation failure rate and the
key-telemetry table's rates) are ratios of these counters, computed by Prometheus recording
rules (ops/prometheus/toolgate-rules.yml), not gauges computed here. Latency is the agent's: from
the proposal's creation to its observation. Counts are added once per round per label set, so
the cost on the hot path is a dict update per call.

A mutation-class violation is a call of a tool declared READ_ONLY whose result says state changed:
it asks for post-action verification or for compensation. A retry budget is exhausted when a
call ends in a retryable class after more attempts than its contract's `max_retries` allows.
The rare counters start at zero for every contract, so an alert on them has a series to read.
"""

from __future__ import annotations

import time
from collections import defaultdict

from opentelemetry.metrics import Counter, Meter

from toolgate.schemas.models import ExecutionResult, TaxonomyClass
from toolgate.telemetry import meter
from toolgate.workers.runtime.span_attributes import CONTRACTS

T = TaxonomyClass
INPUT_SCHEMA = frozenset({T.SYNTACTIC_PARSE_FAIL, T.STRUCTURAL_VIOLATION, T.TYPE_MISMATCH, T.OUT_OF_BOUNDS})
OUTPUT_SCHEMA = frozenset({T.OBSERVATION_NORMALIZATION_FAIL})
TRANSIENT = frozenset({T.TIMEOUT, T.DEPENDENCY_UNAVAILABLE, T.RATE_LIMITED, T.IDEMPOTENCY_CONFLICT})
STATE_CHANGED = frozenset({T.COMPENSATION_REQUIRED, T.COMPENSATION_FAILED})
Labels = tuple[tuple[str, str], ...]
Adds = defaultdict[tuple[Counter, Labels], float]  # what a round adds to each counter, by label set


class CallMetrics:
    def __init__(self, instruments: Meter | None = None) -> None:
        m = instruments or meter()
        self._count = m.create_counter("tool.invocation.count", description="calls that ended, by outcome")
        self._latency = m.create_histogram("tool.invocation.latency", unit="ms", description="proposal to observation")
        self._cost = m.create_counter("tool.invocation.cost", description="cost of executed calls, contract's unit")
        self._retries = m.create_counter("tool.invocation.retries", description="attempts beyond the first")
        self._timeouts = m.create_counter("tool.invocation.timeouts", description="calls that ended in TIMEOUT")
        self._replays = m.create_counter("tool.idempotency.replays", description="answered from an idempotency key")
        self._schema = m.create_counter("tool.schema.validation_failures", description="schema failures by phase")
        self._exhausted = m.create_counter("tool.retry_budget.exhausted", description="retryable ends past max_retries")
        self._violations = m.create_counter("tool.mutation_class.violations", description="READ_ONLY changed state")
        self._zeroed = False

    def _zero(self) -> None:
        """Start the rare counters at zero for every contract (once the meter is installed)."""
        self._zeroed = True
        for contract in CONTRACTS.registry or ():
            tool = {"tool": contract.name, "version": contract.version}
            timeout_class = str(contract.binding.get("timeout_class", ""))
            for counter in (self._retries, self._exhausted, self._violations):
                counter.add(0, tool)
            self._timeouts.add(0, {**tool, "timeout_class": timeout_class})
            self._replays.add(0, {"tool": contract.name, "side_effect_class": contract.side_effect_class})
            for phase in ("input", "output"):
                self._schema.add(0, {"tool": contract.name, "phase": phase})

    def record(self, results: list[ExecutionResult]) -> None:
        """Count the calls that ended in this round: each counter once per label set (an add
        costs ~15 µs in the SDK whatever it adds), the latency once per call."""
        if not self._zeroed:
            self._zero()
        now_ms = time.time() * 1000
        adds: Adds = defaultdict(float)
        for result in results:
            self._one(result, now_ms, adds)
        for (counter, labels), amount in adds.items():
            counter.add(amount, dict(labels))

    def _one(self, result: ExecutionResult, now_ms: float, adds: Adds) -> None:
        contract = CONTRACTS.of(result.tool_name, result.tool_version)
        side_effect = contract.side_effect_class if contract is not None else "unknown"
        timeout_class = str(contract.binding.get("timeout_class", "")) if contract is not None else ""
        tool: Labels = (("tool", result.tool_name), ("version", result.tool_version))
        timed: Labels = (*tool, ("timeout_class", timeout_class))
        taxonomy = result.outcome.taxonomy_class
        self._latency.record(max(0.0, now_ms - result.created_at_ms), dict(timed))
        if result.attempt_number > 1:
            adds[self._retries, tool] += result.attempt_number - 1
        if taxonomy is T.TIMEOUT:
            adds[self._timeouts, timed] += 1
        if result.idempotency_hit:
            adds[self._replays, (("tool", result.tool_name), ("side_effect_class", side_effect))] += 1
        if taxonomy in INPUT_SCHEMA or taxonomy in OUTPUT_SCHEMA:
            phase = "input" if taxonomy in INPUT_SCHEMA else "output"
            adds[self._schema, (("tool", result.tool_name), ("phase", phase))] += 1
        if contract is not None:
            self._contract_facts(result, contract.max_retries, side_effect, contract.document["runtime"], tool, adds)
        labels = (
            ("tool", result.tool_name),
            ("version", result.tool_version),
            ("tenant", result.tenant_id),
            ("side_effect_class", side_effect),
            ("taxonomy_class", taxonomy.value),
            ("status", "error" if result.outcome.is_error else "ok"),
            ("lifecycle", contract.lifecycle if contract is not None else "unknown"),
        )
        adds[self._count, labels] += 1

    def _contract_facts(
        self,
        result: ExecutionResult,
        max_retries: int,
        side_effect: str,
        runtime: object,
        tool: Labels,
        adds: Adds,
    ) -> None:
        taxonomy = result.outcome.taxonomy_class
        if taxonomy in TRANSIENT and result.attempt_number > max_retries:
            adds[self._exhausted, tool] += 1
        if side_effect == "READ_ONLY" and (
            taxonomy in STATE_CHANGED or result.verification.post_action_verification_required
        ):
            adds[self._violations, tool] += 1
        cost = runtime.get("cost_profile") if isinstance(runtime, dict) else None
        if cost and result.stage == "execution" and not result.idempotency_hit:
            labels = (
                *tool,
                ("cost_category", str(cost.get("cost_unit", "call"))),
                ("currency", str(cost.get("currency", ""))),
            )
            adds[self._cost, labels] += float(cost.get("cost_per_call", 0) or 0)
