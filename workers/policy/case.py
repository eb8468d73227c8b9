"""What the policy gates read about one call (`Case`, with the usage counted so far) and what
they answer (`Allow`, `Deny`). Pure data."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from toolgate.contracts.budgets import Budgets
from toolgate.contracts.contract import Contract
from toolgate.schemas.models import FieldError, StageRecord, TaxonomyClass
from toolgate.workers.runtime.facts import Facts

Values = tuple[tuple[str, int], ...]  # (value dimension, amount): contracts/values.py


@dataclass
class Recent:
    """The calls inside a tenant's rate window for a tool: how many, and when the oldest was made."""

    count: int = 0
    oldest_ms: int | None = None


def run_of(record: StageRecord) -> tuple[str, str, str]:
    """A run: (tenant, agent, run_id). The run_id is the agent's to name, so it names a run of
    that agent only; another agent of the tenant naming it has a run of its own."""
    return record.call.tenant_id, record.call.principal.agent_id, record.call.run_id


@dataclass
class Usage:
    """Counts of usage events, kept current through a round as calls are allowed."""

    per_run: dict[tuple[str, str, str, str], int] = field(default_factory=dict)  # (tenant, agent, run, dimension)
    per_day: dict[tuple[str, str], int] = field(default_factory=dict)  # (tenant, dimension)
    rate: dict[tuple[str, str], Recent] = field(default_factory=dict)  # (tenant, tool)
    counted: set[str] = field(default_factory=set)  # operations (event ids) already counted
    value_run: dict[tuple[str, str, str, str], int] = field(default_factory=dict)  # value reserved per run
    value_day: dict[tuple[str, str], int] = field(default_factory=dict)  # value reserved per tenant today
    released: set[str] = field(default_factory=set)  # counted operations whose value was released, not ended

    def record(
        self, record: StageRecord, event_id: str, spends: tuple[str, ...], now_ms: int, values: Values = ()
    ) -> None:
        for dim, amount in values:  # the value budgets' reservations (workers/policy/values.py)
            run = (*run_of(record), dim)
            self.value_run[run] = self.value_run.get(run, 0) + amount
            day = (record.call.tenant_id, dim)
            self.value_day[day] = self.value_day.get(day, 0) + amount
        for dim in spends:
            key = (*run_of(record), dim)
            self.per_run[key] = self.per_run.get(key, 0) + 1
            self.per_day[(record.call.tenant_id, dim)] = self.per_day.get((record.call.tenant_id, dim), 0) + 1
        recent = self.rate.setdefault((record.call.tenant_id, record.call.tool_name), Recent())
        recent.count += 1
        recent.oldest_ms = now_ms if recent.oldest_ms is None else recent.oldest_ms
        self.counted.add(event_id)
        self.released.discard(event_id)


@dataclass(frozen=True)
class Allow:
    required_approvals: int
    spends: tuple[str, ...]  # budget dimensions this call spends (empty: counted before, or dry run)
    standing: tuple[str, ...] = field(default=(), compare=False)  # where the call leaves each budget
    approver_groups: tuple[str, ...] = ()  # named by Cedar's permits; none: the contract's groups
    values: Values = field(default=(), compare=False)  # (value dimension, amount) reserved with `spends`


@dataclass(frozen=True)
class Deny:
    taxonomy_class: TaxonomyClass
    errors: tuple[FieldError, ...]
    retry_after_ms: int | None = None
    rule: str | None = None
    finding: str | None = None  # for the audit log only, never the agent (e.g. cross_tenant)


@dataclass(frozen=True)
class Permit:
    """Cedar's permit of a call (workers/policy/cedar.py): the approvals its permits ask for."""

    approvals: int  # the most any applying permit asks for (0: none asks)
    groups: tuple[str, ...]  # the approver groups those permits name, in policy order
    rules: tuple[str, ...]  # the @id of every permit that applied


# Cedar's verdict on a call, judged for the whole round before the gates run.
Verdict = Permit | Deny


@dataclass(frozen=True)
class Case:
    """One call as the gates see it: the record, its contract, and everything read about it."""

    record: StageRecord
    contract: Contract
    policy: Budgets
    facts: Facts
    usage: Usage
    event_id: str
    now_ms: int
    environment: str
    verdict: Verdict  # Cedar's on the call (workers/policy/cedar.py)
    quarantined: frozenset[tuple[str, str]] = frozenset()  # (tool, version) held until an operator releases them


# A gate ends the decision with its outcome, or returns None to let the next gate decide.
Gate = Callable[[Case], Allow | Deny | None]


def deny(
    taxonomy_class: TaxonomyClass,
    code: str,
    message: str,
    *,
    field: str | None = None,
    expected: str | None = None,
    actual: str | None = None,
    retry_after_ms: int | None = None,
    rule: str | None = None,
    finding: str | None = None,
) -> Deny:
    error = FieldError(code=code, message=message, field=field, expected=expected, actual=actual)
    return Deny(taxonomy_class, (error,), retry_after_ms, rule, finding)
