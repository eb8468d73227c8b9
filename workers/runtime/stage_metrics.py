"""The metrics that only one stage can count, because only it knows the fact: validation its
gates' verdicts and the repair loop, execution how a compensation ended. The round's telemetry
records them when the round's outputs were delivered, from what the handler put in its `Emit`
(call_facts.py says what each fact means).

| instrument (OpenTelemetry) | Prometheus | labels | counted by |
|---|---|---|---|
| tool.validation.proposals | tool_validation_proposals_total | tool, version, attempt (first, repair), | validation |
| | | schema, semantic (valid, invalid, unchecked) | |
| tool.repair.loops | tool_repair_loops_total | tool, version, event (triggered, repaired, exhausted) | validation |
| tool.compensations | tool_compensations_total | tool, version, result (succeeded, failed, unverified) | execution |

Every proposal validation answers or forwards is counted once in `tool.validation.proposals`
(one refused at the door, before any gate, as schema and semantic `unchecked`); one that proves
no one is not. Labels come from the registry, as call_metrics.py's do: a tool or version no
contract has is "unknown". The counters start at zero for every contract, so a rate over them
has a series to read before the first event.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Sequence

from opentelemetry.metrics import Counter, Meter

from toolgate.schemas.models import StageRecord, ToolProposal
from toolgate.telemetry.setup import meter
from toolgate.workers.runtime.call_facts import GateFacts, compensation_of
from toolgate.workers.runtime.emit import Emit
from toolgate.workers.runtime.handler import Inbound
from toolgate.workers.runtime.passages import Passage
from toolgate.workers.runtime.span_attributes import CONTRACTS

UNKNOWN = "unknown"
DOOR = "unchecked"
NOT_ANSWERED = frozenset({Passage.HELD, Passage.DEAD_LETTERED})
Labels = tuple[tuple[str, str], ...]


def tool_labels(name: str, spec: str) -> Labels:
    """The call's tool and the exact version of its contract, or "unknown" for both."""
    contract = CONTRACTS.of(name, spec)
    if contract is None:
        return (("tool", UNKNOWN), ("version", UNKNOWN))
    return (("tool", contract.name), ("version", contract.version))


def _every_contract() -> list[Labels]:
    return [(("tool", c.name), ("version", c.version)) for c in CONTRACTS.registry or ()]


def _add(counter: Counter, tally: Tally[Labels]) -> None:
    for labels, amount in tally.items():
        counter.add(amount, dict(labels))


class ValidationMetrics:
    def __init__(self, instruments: Meter | None = None) -> None:
        m = instruments or meter()
        self._proposals = m.create_counter("tool.validation.proposals", description="proposals by gate verdict")
        self._loops = m.create_counter("tool.repair.loops", description="repair-loop events")
        self._zeroed = False

    def _zero(self) -> None:
        self._zeroed = True
        for tool in _every_contract():
            for attempt in ("first", "repair"):
                self._proposals.add(0, {**dict(tool), "attempt": attempt, "schema": "valid", "semantic": "valid"})
            for event in ("triggered", "repaired", "exhausted"):
                self._loops.add(0, {**dict(tool), "event": event})

    def record(self, calls: Sequence[Inbound[ToolProposal]], out: Emit) -> None:
        """Count each proposal the round answered or forwarded, by what its gates found."""
        if not self._zeroed:
            self._zero()
        proposals: Tally[Labels] = Tally()
        loops: Tally[Labels] = Tally()
        for call in calls:
            proposal = call.model
            if out.outcomes.get(proposal.call_id, Passage.HELD) in NOT_ANSWERED:
                continue
            found = out.facts.get(proposal.call_id)
            if found is None:  # refused at the door: no gate saw it
                attempt = "repair" if proposal.repair_attempt > 0 else "first"
                found = GateFacts(attempt, DOOR, DOOR)
            tool = tool_labels(proposal.tool_name, proposal.tool_version)
            proposals[(*tool, ("attempt", found.attempt), ("schema", found.schema), ("semantic", found.semantic))] += 1
            for event in found.loop:
                loops[(*tool, ("event", event))] += 1
        _add(self._proposals, proposals)
        _add(self._loops, loops)


class CompensationMetrics:
    def __init__(self, instruments: Meter | None = None) -> None:
        m = instruments or meter()
        self._compensations = m.create_counter("tool.compensations", description="compensations that ran, by end")
        self._zeroed = False

    def record(self, calls: Sequence[Inbound[StageRecord]], out: Emit) -> None:
        """Count each compensation the round ran, by how it ended."""
        if not self._zeroed:
            self._zeroed = True
            for tool in _every_contract():
                for result in ("succeeded", "failed", "unverified"):
                    self._compensations.add(0, {**dict(tool), "result": result})
        ended: Tally[Labels] = Tally()
        for call in calls:
            record = call.model
            how = compensation_of(record, out.ended.get(record.call.call_id))
            if how is not None:
                ended[(*tool_labels(record.call.tool_name, record.call.tool_version), ("result", how))] += 1
        _add(self._compensations, ended)
