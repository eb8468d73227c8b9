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

Labels come from the registry, never from what a call says: a call naming a tool or version no
contract has (refused by validation) is counted with tool, version and the contract's labels
"unknown", or any caller could add series to Prometheus without end.

A mutation-class violation is a call of a tool declared READ_ONLY that execution caught writing
(its statement refused in a read-only transaction: error code mutation_class_violation), or whose
result says state changed: it asks for post-action verification or for compensation. A retry budget is exhausted when a
call ends in a retryable class after more attempts than its contract's `max_retries` allows.
The rare counters start at zero for every contract, so an alert on them has a series to read.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass

from opentelemetry.metrics import Counter, Meter

from toolgate.contracts.contract import Contract
from toolgate.schemas.models import ExecutionResult, TaxonomyClass
from toolgate.taxonomy import MUTATION_CLASS_VIOLATION
from toolgate.telemetry.setup import meter
from toolgate.workers.runtime.span_attributes import CONTRACTS

T = TaxonomyClass
INPUT_SCHEMA = frozenset({T.SYNTACTIC_PARSE_FAIL, T.STRUCTURAL_VIOLATION, T.TYPE_MISMATCH, T.OUT_OF_BOUNDS})
OUTPUT_SCHEMA = frozenset({T.OBSERVATION_NORMALIZATION_FAIL})
TRANSIENT = frozenset({T.TIMEOUT, T.DEPENDENCY_UNAVAILABLE, T.RATE_LIMITED, T.IDEMPOTENCY_CONFLICT})
STATE_CHANGED = frozenset({T.COMPENSATION_REQUIRED, T.COMPENSATION_FAILED})
Labels = tuple[tuple[str, str], ...]
UNKNOWN = "unknown"  # every label a contract would give, for a call naming none the registry has
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
        self._shapes: dict[tuple[str, str], _Shape] = {}

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
        """Count the calls that ended in this round: each counter once per label set (an add is
        dear in the SDK whatever it adds; docs/performance.md, "Figures behind the code"), the
        latency once per call."""
        if not self._zeroed:
            self._zero()
        now_ms = time.time() * 1000
        adds: Adds = defaultdict(float)
        for result in results:
            self._one(result, now_ms, adds)
        for (counter, labels), amount in adds.items():
            counter.add(amount, dict(labels))

    def _one(self, result: ExecutionResult, now_ms: float, adds: Adds) -> None:
        shape = self._shape(result.tool_name, result.tool_version)
        taxonomy = result.outcome.taxonomy_class
        self._latency.record(max(0.0, now_ms - result.created_at_ms), shape.timed_attributes)
        if result.attempt_number > 1:
            adds[self._retries, shape.tool] += result.attempt_number - 1
        if taxonomy is T.TIMEOUT:
            adds[self._timeouts, shape.timed] += 1
        if result.idempotency_hit:
            adds[self._replays, shape.replayed] += 1
        if taxonomy in INPUT_SCHEMA or taxonomy in OUTPUT_SCHEMA:
            phase = "input" if taxonomy in INPUT_SCHEMA else "output"
            adds[self._schema, (shape.tool[0], ("phase", phase))] += 1
        if shape.known:
            self._contract_facts(result, shape, adds)
        labels = (
            *shape.tool,
            ("tenant", result.tenant_id),
            ("side_effect_class", shape.side_effect),
            ("taxonomy_class", taxonomy.value),
            ("status", "error" if result.outcome.is_error else "ok"),
            ("lifecycle", shape.lifecycle),
        )
        adds[self._count, labels] += 1

    def _shape(self, name: str, version: str) -> _Shape:
        """What a call's labels take from its contract, worked out once per (tool, version)."""
        shape = self._shapes.get((name, version))
        if shape is None:
            contract = CONTRACTS.of(name, version)
            if contract is None:  # not kept: a name any caller can make up
                return UNKNOWN_SHAPE
            shape = self._shapes[name, version] = _Shape.of(name, version, contract)
        return shape

    def _contract_facts(self, result: ExecutionResult, shape: _Shape, adds: Adds) -> None:
        taxonomy = result.outcome.taxonomy_class
        if taxonomy in TRANSIENT and result.attempt_number > shape.max_retries:
            adds[self._exhausted, shape.tool] += 1
        if shape.side_effect == "READ_ONLY" and (
            taxonomy in STATE_CHANGED or result.verification.post_action_verification_required or _caught(result)
        ):
            adds[self._violations, shape.tool] += 1
        if shape.cost is not None and result.stage == "execution" and not result.idempotency_hit:
            labels, amount = shape.cost
            adds[self._cost, labels] += amount


def _caught(result: ExecutionResult) -> bool:
    """Execution caught the tool writing in its read-only transaction (workers/execution/bounds.py);
    a copy answered from that first outcome is not counted again."""
    return not result.idempotency_hit and any(e.code == MUTATION_CLASS_VIOLATION for e in result.errors)


@dataclass(frozen=True)
class _Shape:
    """A contract's part in a call's labels: its side-effect class, timeout class, lifecycle,
    retry allowance and cost profile. A call naming a tool or version the registry does not have
    is labelled "unknown" throughout, its tool and version too."""

    tool: Labels
    timed: Labels
    timed_attributes: dict[str, str]  # the latency's, as the SDK takes them
    replayed: Labels
    side_effect: str
    lifecycle: str
    known: bool
    max_retries: int = 0
    cost: tuple[Labels, float] | None = None

    @classmethod
    def of(cls, name: str, version: str, contract: Contract) -> _Shape:
        tool: Labels = (("tool", name), ("version", version))
        timed: Labels = (*tool, ("timeout_class", str(contract.binding.get("timeout_class", ""))))
        side_effect = contract.side_effect_class
        replayed: Labels = (("tool", name), ("side_effect_class", side_effect))
        runtime = contract.document["runtime"]
        profile = runtime.get("cost_profile") if isinstance(runtime, dict) else None
        cost = None
        if profile:
            labels: Labels = (
                *tool,
                ("cost_category", str(profile.get("cost_unit", "call"))),
                ("currency", str(profile.get("currency", ""))),
            )
            cost = (labels, float(profile.get("cost_per_call", 0) or 0))
        return cls(
            tool, timed, dict(timed), replayed, side_effect, contract.lifecycle, True, contract.max_retries, cost
        )


# A caller may name any tool: a call naming one the registry does not have is counted under this
# one shape, so its name is no label (or the series would be unbounded).
_UNKNOWN_TOOL: Labels = (("tool", UNKNOWN), ("version", UNKNOWN))
_UNKNOWN_TIMED: Labels = (*_UNKNOWN_TOOL, ("timeout_class", ""))
UNKNOWN_SHAPE = _Shape(
    _UNKNOWN_TOOL,
    _UNKNOWN_TIMED,
    dict(_UNKNOWN_TIMED),
    (("tool", UNKNOWN), ("side_effect_class", UNKNOWN)),
    UNKNOWN,
    UNKNOWN,
    known=False,
)
