"""The seeds' per-invocation metrics (tool-contract chapter, "Metrics"), recorded where every
call ends: normalization, once per call, at its final observation, whichever stage produced it.

| instrument (OpenTelemetry) | Prometheus | labels |
|---|---|---|
| tool.invocation.count | tool_invocation_count_total | tool, version, tenant, side_effect_class, |
| | | taxonomy_class, status (ok, error), lifecycle (active, deprecated, ...), |
| | | stage (where the call ended: validation ... execution, reconciliation) |
| tool.invocation.latency (ms) | tool_invocation_latency_milliseconds | tool, version, timeout_class |
| tool.invocation.cost | tool_invocation_cost_total | tool, version, cost_category, currency |
| tool.invocation.retries | tool_invocation_retries_total | tool, version |
| tool.invocation.timeouts | tool_invocation_timeouts_total | tool, version, timeout_class |
| tool.invocation.interim | tool_invocation_interim_total | tool, version, tenant, kind (approval_pending, |
| | | outcome_unverified) |
| tool.idempotency.replays | tool_idempotency_replays_total | tool, side_effect_class |
| tool.schema.validation_failures | tool_schema_validation_failures_total | tool, phase (input, output) |
| tool.retry_budget.exhausted | tool_retry_budget_exhausted_total | tool, version |
| tool.mutation_class.violations | tool_mutation_class_violations_total | tool, version |
| tool.retry.attempts | tool_retry_attempts_total | tool, version, result (succeeded, failed, blocked) |
| tool.verification.required | tool_verification_required_total | tool, version |
| tool.traces | tool_traces_total | tool, version, complete (true, false) |

**Once per call.** A call held for approval, or whose outcome is being verified, first gets an
interim observation (status code 202) and later its final one. Only the final one counts as the
invocation, with its latency, timeout, retries, cost and error class; an interim one counts in
`tool.invocation.interim` by its kind (call_facts.py), so a held call that is approved counts one
invocation and one interim observation, and an interim TIMEOUT is neither a timeout nor an error.

The seeds' rates (timeout rate, idempotency replay rate, schema validation failure rate and the
key-telemetry table's rates) are ratios of these counters, computed by Prometheus recording
rules (ops/prometheus/toolgate-rules.yml), not gauges computed here. Latency is the agent's: from
the proposal's creation to its final observation. `tool.invocation.retries` adds one for each
call that is a retry of its operation (attempt_number > 1, executed; a replay is no retry);
`tool.retry.attempts` says how such retries ended, and counts as `blocked` the repeats refused
because their operation was still in flight (call_facts.py). `tool.verification.required`
counts final observations asking for post-action verification; `tool.traces` whether each
call's trace is complete (call_facts.py). A result normalization could not turn into its observation
counts as the OBSERVATION_NORMALIZATION_FAIL its agent got. Counts are added once per round per label set, so the
cost on the hot path is a dict update per call.

Labels come from the registry, never from what a call says (call_shapes.py).

A mutation-class violation is a call of a tool declared READ_ONLY that execution caught writing
(its statement refused in a read-only transaction: error code mutation_class_violation), or whose
result says state changed: it asks for post-action verification or for compensation. A retry budget is exhausted when a
call ends in a retryable class after more attempts than its contract's `max_retries` allows.
The rare counters start at zero for every contract, so an alert or rate on them has a series to
read.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Collection

from opentelemetry.metrics import Counter, Meter

from toolgate.schemas.models import ExecutionResult, TaxonomyClass
from toolgate.taxonomy import MUTATION_CLASS_VIOLATION
from toolgate.telemetry.setup import meter
from toolgate.workers.runtime.call_facts import interim_kind, retry_of, trace_complete
from toolgate.workers.runtime.call_shapes import UNKNOWN as UNKNOWN
from toolgate.workers.runtime.call_shapes import UNKNOWN_SHAPE, Labels, Shape
from toolgate.workers.runtime.results import outcome
from toolgate.workers.runtime.span_attributes import CONTRACTS

T = TaxonomyClass
INPUT_SCHEMA = frozenset({T.SYNTACTIC_PARSE_FAIL, T.STRUCTURAL_VIOLATION, T.TYPE_MISMATCH, T.OUT_OF_BOUNDS})
OUTPUT_SCHEMA = frozenset({T.OBSERVATION_NORMALIZATION_FAIL})
TRANSIENT = frozenset({T.TIMEOUT, T.DEPENDENCY_UNAVAILABLE, T.RATE_LIMITED, T.IDEMPOTENCY_CONFLICT})
STATE_CHANGED = frozenset({T.COMPENSATION_REQUIRED, T.COMPENSATION_FAILED})
Adds = defaultdict[tuple[Counter, Labels], float]  # what a round adds to each counter, by label set


class CallMetrics:
    def __init__(self, instruments: Meter | None = None) -> None:
        m = instruments or meter()
        self._count = m.create_counter("tool.invocation.count", description="calls that ended, by outcome")
        self._latency = m.create_histogram("tool.invocation.latency", unit="ms", description="proposal to observation")
        self._cost = m.create_counter("tool.invocation.cost", description="cost of executed calls, contract's unit")
        self._retries = m.create_counter("tool.invocation.retries", description="calls that retried their operation")
        self._timeouts = m.create_counter("tool.invocation.timeouts", description="calls that ended in TIMEOUT")
        self._interim = m.create_counter("tool.invocation.interim", description="interim observations, by kind")
        self._replays = m.create_counter("tool.idempotency.replays", description="answered from an idempotency key")
        self._schema = m.create_counter("tool.schema.validation_failures", description="schema failures by phase")
        self._exhausted = m.create_counter("tool.retry_budget.exhausted", description="retryable ends past max_retries")
        self._violations = m.create_counter("tool.mutation_class.violations", description="READ_ONLY changed state")
        self._attempts = m.create_counter("tool.retry.attempts", description="retries of an operation, by end")
        self._verify = m.create_counter("tool.verification.required", description="asked for post-action checks")
        self._traces = m.create_counter("tool.traces", description="calls by whether their trace is complete")
        self._zeroed = False
        self._shapes: dict[tuple[str, str], Shape] = {}

    def _zero(self) -> None:
        """Start the rare counters at zero for every contract (once the meter is installed)."""
        self._zeroed = True
        for contract in CONTRACTS.registry or ():
            tool = {"tool": contract.name, "version": contract.version}
            timeout_class = str(contract.binding.get("timeout_class", ""))
            for counter in (self._retries, self._exhausted, self._violations, self._verify):
                counter.add(0, tool)
            for result in ("succeeded", "failed", "blocked"):
                self._attempts.add(0, {**tool, "result": result})
            for complete in ("true", "false"):
                self._traces.add(0, {**tool, "complete": complete})
            self._timeouts.add(0, {**tool, "timeout_class": timeout_class})
            self._replays.add(0, {"tool": contract.name, "side_effect_class": contract.side_effect_class})
            for phase in ("input", "output"):
                self._schema.add(0, {"tool": contract.name, "phase": phase})

    def record(self, results: list[ExecutionResult], unnormalized: Collection[str] = ()) -> None:
        """Count the calls that ended in this round, and the interim observations apart: each
        counter once per label set (an add is dear in the SDK whatever it adds;
        docs/performance.md, "Figures behind the code"), the latency once per call. The calls
        named in `unnormalized` got OBSERVATION_NORMALIZATION_FAIL instead of their result (or
        no observation at all): that is how they ended."""
        if not self._zeroed:
            self._zero()
        now_ms = time.time() * 1000
        adds: Adds = defaultdict(float)
        for result in results:
            if result.call_id in unnormalized:
                result = result.model_copy(update={"outcome": outcome(T.OBSERVATION_NORMALIZATION_FAIL)})
            shape = self._shape(result.tool_name, result.tool_version)
            kind = interim_kind(result)
            if kind is not None:
                adds[self._interim, (*shape.tool, ("tenant", result.tenant_id), ("kind", kind))] += 1
            else:
                self._one(result, shape, now_ms, adds)
        for (counter, labels), amount in adds.items():
            counter.add(amount, dict(labels))

    def _one(self, result: ExecutionResult, shape: Shape, now_ms: float, adds: Adds) -> None:
        taxonomy = result.outcome.taxonomy_class
        self._latency.record(max(0.0, now_ms - result.created_at_ms), shape.timed_attributes)
        retry = retry_of(result)
        if retry is not None:
            adds[self._attempts, (*shape.tool, ("result", retry))] += 1
            if retry != "blocked":
                adds[self._retries, shape.tool] += 1
        if taxonomy is T.TIMEOUT:
            adds[self._timeouts, shape.timed] += 1
        if result.idempotency_hit:
            adds[self._replays, shape.replayed] += 1
        if taxonomy in INPUT_SCHEMA or taxonomy in OUTPUT_SCHEMA:
            phase = "input" if taxonomy in INPUT_SCHEMA else "output"
            adds[self._schema, (shape.tool[0], ("phase", phase))] += 1
        if shape.known:
            self._contract_facts(result, shape, adds)
        complete = "true" if trace_complete(result, shape.known) else "false"
        adds[self._traces, (*shape.tool, ("complete", complete))] += 1
        labels = (
            *shape.tool,
            ("tenant", result.tenant_id),
            ("side_effect_class", shape.side_effect),
            ("taxonomy_class", taxonomy.value),
            ("status", "error" if result.outcome.is_error else "ok"),
            ("lifecycle", shape.lifecycle),
            ("stage", result.stage),
        )
        adds[self._count, labels] += 1

    def _shape(self, name: str, version: str) -> Shape:
        """What a call's labels take from its contract, worked out once per (tool, version)."""
        shape = self._shapes.get((name, version))
        if shape is None:
            contract = CONTRACTS.of(name, version)
            if contract is None:  # not kept: a name any caller can make up
                return UNKNOWN_SHAPE
            shape = self._shapes[name, version] = Shape.of(name, version, contract)
        return shape

    def _contract_facts(self, result: ExecutionResult, shape: Shape, adds: Adds) -> None:
        taxonomy = result.outcome.taxonomy_class
        if taxonomy in TRANSIENT and result.attempt_number > shape.max_retries:
            adds[self._exhausted, shape.tool] += 1
        verify = result.verification.post_action_verification_required
        if shape.side_effect == "READ_ONLY" and (taxonomy in STATE_CHANGED or verify or _caught(result)):
            adds[self._violations, shape.tool] += 1
        if verify and shape.side_effect != "READ_ONLY":
            adds[self._verify, shape.tool] += 1
        if shape.cost is not None and result.stage == "execution" and not result.idempotency_hit:
            labels, amount = shape.cost
            adds[self._cost, labels] += amount


def _caught(result: ExecutionResult) -> bool:
    """Execution caught the tool writing in its read-only transaction (workers/execution/bounds.py);
    a copy answered from that first outcome is not counted again."""
    return not result.idempotency_hit and any(e.code == MUTATION_CLASS_VIOLATION for e in result.errors)
