"""A round's policy decisions, in order, each with Cedar's verdict on its call (issue 51). Pure.

The policy stage decides a round's calls in order (`decide_round`), and each allowed call spends
usage (`Usage.record`) that the calls after it are judged against: budgets, rate limits, and
Cedar. A policy that reads `context.usage` must see exactly that: the usage the round's earlier
calls spent. So a call whose action's policies read no `usage` path (contracts/cedar_reads.py)
is judged with every such call of the round in one batch up front, its verdict independent of
the order; a call whose action's policies read `usage` is judged alone, when its turn comes,
against the usage as it stands then. The shipped set reads no usage: a round is one batch.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from toolgate.contracts.budgets import Budgets
from toolgate.contracts.cedar_policy import CedarPolicy
from toolgate.contracts.cedar_reads import reads
from toolgate.contracts.cedar_schema import DIMENSIONS, action_id, resource_binding
from toolgate.contracts.contract import Contract
from toolgate.schemas.models import StageRecord
from toolgate.workers.policy.case import Allow, Deny, Usage, Verdict, run_of
from toolgate.workers.policy.cedar import Ask, judge
from toolgate.workers.policy.decision import decide
from toolgate.workers.runtime.facts import Facts, owned


def ask_of(
    record: StageRecord, contract: Contract, used: Usage, environment: str, now_ms: int, facts: Facts | None = None
) -> Ask:
    """What Cedar is asked about `record`: its run's and its tenant's usage so far, by dimension,
    and the row of its tenant-bound resource among the round's `facts` (its tenant's own)."""
    tenant, agent, run = run_of(record)
    bound = resource_binding(contract)
    value = record.call.arguments.get(bound["argument"]) if bound else None
    resource = owned((facts or {}).get((bound["lookup"], value)), tenant) if bound and isinstance(value, str) else None
    return Ask(
        record,
        contract,
        environment,
        now_ms,
        {dim: used.per_run.get((tenant, agent, run, dim), 0) for dim in DIMENSIONS},
        {dim: used.per_day.get((tenant, dim), 0) for dim in DIMENSIONS},
        resource,
    )


def reads_usage(policy: CedarPolicy, contract: Contract) -> bool:
    """Whether the policies that may apply to `contract`'s action read the call's usage (a tool
    version the set was not admitted against reads nothing: it is refused whatever the usage)."""
    action = action_id(contract)
    return action in policy.reads and reads(policy.reads[action], "usage")


class RoundVerdicts:
    """The verdicts of one round's calls (`calls`: record and contract, in the round's order),
    judged against `used`, the round's usage, which the caller keeps current as it allows calls,
    and the resources the round's `facts` hold.
    `of(i)` is the i-th call's verdict, asked for in order."""

    def __init__(
        self,
        policy: CedarPolicy,
        calls: Sequence[tuple[StageRecord, Contract]],
        used: Usage,
        environment: str,
        now_ms: int,
        domains: Mapping[str, Sequence[str]],
        facts: Facts | None = None,
    ) -> None:
        self.policy, self.calls, self.used = policy, calls, used
        self.environment, self.now_ms, self.domains, self.facts = environment, now_ms, domains, facts
        ahead = [i for i, (_, contract) in enumerate(calls) if not reads_usage(policy, contract)]
        judged = judge(policy, [self._ask(i) for i in ahead], domains) if ahead else []
        self.ahead: dict[int, Verdict] = dict(zip(ahead, judged, strict=True))

    def _ask(self, index: int) -> Ask:
        record, contract = self.calls[index]
        return ask_of(record, contract, self.used, self.environment, self.now_ms, self.facts)

    def of(self, index: int) -> Verdict:
        """The index-th call's verdict: judged up front, or now, against the usage as it stands."""
        if index in self.ahead:
            return self.ahead[index]
        return judge(self.policy, [self._ask(index)], self.domains)[0]


def decide_round(
    policy: Budgets,
    cedar: CedarPolicy,
    calls: Sequence[tuple[StageRecord, Contract, str]],
    facts: Facts,
    used: Usage,
    now_ms: int,
    environment: str,
    quarantined: frozenset[tuple[str, str]],
    domains: Mapping[str, Sequence[str]],
) -> Iterator[Allow | Deny]:
    """The decision on each of `calls` (record, contract, usage event id), in order, each taking
    Cedar's verdict; an allowed call's spending is counted in `used` before the next is decided."""
    verdicts = RoundVerdicts(
        cedar, [(record, contract) for record, contract, _ in calls], used, environment, now_ms, domains, facts
    )
    for index, (record, contract, event_id) in enumerate(calls):
        verdict = verdicts.of(index)
        decision = decide(
            record, contract, policy, facts, used, event_id, now_ms, environment, quarantined, verdict=verdict
        )
        if isinstance(decision, Allow) and decision.spends:  # a new operation, not a dry run or a retry
            used.record(record, event_id, decision.spends, now_ms, decision.values)
        yield decision
