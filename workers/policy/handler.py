"""The policy handler: tool.validated -> tool.authorized (or a typed refusal on tool.results).

One Postgres transaction per round: which of the round's tool versions are quarantined
(store/quarantine.py), the facts every call needs about the resources it names (one query per
lookup kind), the usage counted so far (budgets per run and per tenant and day, each tool's
rate window, the value reserved: store/values.py) under a per-tenant advisory lock so concurrent
policy workers cannot both spend the last unit of a budget, the decisions, the usage events (and
value reservations) of the allowed calls, an audit
entry for every refusal, and each decision's record with what it was judged on (witness.py,
toolgate.call_decisions: one statement in the round's final batch).

The policy rules are Cedar's: the worker admits its policy set when it starts
(TOOLGATE_POLICY_DIR, the shipped `contracts/cedar/` by default; contracts/cedar_policy.py) and
does not start on a set that cannot be admitted. Each round is decided in order by
workers/policy/round_decisions.py, each call with Cedar's verdict (the round's calls judged in
one batch, or in turn where a policy reads the usage the round spends). Budgets and rate limits
are the set's budgets.json (contracts/budgets.py). A set deployed while the worker runs
(`toolgate policy deploy`) is taken at a round's start, and a shadow set judged beside the
enforcing one: workers/policy/live.py, workers/policy/shadow.py.
"""

from __future__ import annotations

from toolgate.contracts.budgets import Budgets
from toolgate.contracts.contract import Contract
from toolgate.contracts.policy_set import PolicySet, load_policy_set
from toolgate.contracts.registry import Registry
from toolgate.contracts.values import derivations
from toolgate.schemas.hashing import operation_event, read_event
from toolgate.schemas.models import StageDecision, StageRecord
from toolgate.scrubber import SCRUBBER
from toolgate.settings import Settings
from toolgate.states import StageOutcome
from toolgate.store import audit, batch, call_decisions, policy_sets, quarantine, tenants, usage, values
from toolgate.workers.policy.case import run_of
from toolgate.workers.policy.decision import Allow, Deny, Recent, Usage, refs
from toolgate.workers.policy.live import LiveSets
from toolgate.workers.policy.round_decisions import decide_round
from toolgate.workers.policy.witness import Inputs, Witness
from toolgate.workers.runtime import fact_loader, facts
from toolgate.workers.runtime.clock import now_ms
from toolgate.workers.runtime.emit import Emit
from toolgate.workers.runtime.handler import Handler, Inbound
from toolgate.workers.runtime.results import reject_record

STAGE = "policy"


class PolicyHandler(Handler[StageRecord]):
    stage = STAGE
    source = "validated"
    model = StageRecord

    def __init__(self, registry: Registry, settings: Settings, policy_set: PolicySet | None = None) -> None:
        # Admitted whole against the registry's contracts, or ContractRefused: the worker does not start.
        self.set = policy_set or load_policy_set(registry, settings.policy_dir)
        self.live = LiveSets(registry, settings, self.set)  # deployed sets, taken at a round's start
        super().__init__(registry, settings, autocommit=True)
        self.environment = settings.environment

    async def handle(self, calls: list[Inbound[StageRecord]], out: Emit) -> None:
        while not await self._round(calls, out):  # a set was deployed: the round again, under it
            pass

    async def _round(self, calls: list[Inbound[StageRecord]], out: Emit) -> bool:
        contracts = {id(c): self.registry.get(c.model.call.tool_name, c.model.call.tool_version) for c in calls}
        events = {id(c): usage_event(c.model, contracts[id(c)].is_mutation) for c in calls}
        wanted = facts.needed(r for c in calls for r in refs(c.model, contracts[id(c)]))
        lookups = fact_loader.statements(wanted)
        reads = UsageReads(calls, contracts, list(events.values()), self.set.budgets)
        held = quarantine.among((c.model.call.tool_name, c.model.call.tool_version) for c in calls)
        async with self.pool.connection() as conn, batch.transaction(conn):
            # One round trip: BEGIN, the quarantined tool versions, the facts, the tenants' locks,
            # the usage reads, the tenants' mail domains and the current policy deployments. The
            # server runs them in order, so every usage read happens under the tenants' locks.
            mail = tenants.domains_among(c.model.call.tenant_id for c in calls)
            deployed = self.live.statement()
            results = await batch.run(conn, [batch.BEGIN, held, *lookups, *reads.statements(), mail, deployed])
            deploys = self.live.changed(results.pop())
            if deploys:  # decided by no set but the deployed one (workers/policy/live.py)
                self.set = await self.live.refresh(conn, deploys)
                return False
            domains = tenants.domains(results.pop())
            quarantined = quarantine.quarantined(results[1])
            known = fact_loader.collect(wanted, results[2 : 2 + len(lookups)])
            used = reads.usage(results[2 + len(lookups) :])
            now = now_ms()
            judged = [(c.model, contracts[id(c)], events[id(c)]) for c in calls]
            shadow = self.live.shadow_round(used)  # None unless a shadow set is deployed
            inputs = Inputs(known, self.environment, now, quarantined, domains, self.set.budgets)
            witness = Witness(judged, [c.raw for c in calls], used, inputs, SCRUBBER.obj)  # each decision's inputs
            setting = (self.environment, quarantined, domains)
            decisions = list(
                witness.watch(decide_round(self.set.budgets, self.set.cedar, judged, known, used, now, *setting))
            )
            spent, refused = self._emit(calls, decisions, events, now, out)
            writes = [usage.record(spent)] if spent else []
            reserved = [  # the value budgets' (workers/policy/values.py)
                r
                for call, decision in zip(calls, decisions, strict=True)
                if isinstance(decision, Allow)
                for r in values.of_call(events[id(call)], run_of(call.model), decision.values)
            ]
            writes += [values.reserve(reserved)] if reserved else []
            disagree = self.live.disagreements(shadow, decisions, judged, known, now, *setting) if shadow else []
            if disagree:  # the shadow set's, recorded with the round's calls (workers/policy/shadow.py)
                writes.append(policy_sets.disagreements_statement(disagree))
            if refused:  # the audit chain's lock and tail first: the rows follow from the tail
                (*_, head) = await batch.run(conn, [*writes, *audit.HEAD])
                writes = [audit.rows_statement(head.rows[0], refused)]
            recorded = call_decisions.record(witness.rows(self.set.digest, self.registry.digest))
            await batch.run(conn, [*writes, recorded, batch.COMMIT])
        self.live.count(disagree)
        return True

    def _emit(
        self,
        calls: list[Inbound[StageRecord]],
        decisions: list[Allow | Deny],
        events: dict[int, str],
        now: int,
        out: Emit,
    ) -> tuple[list[usage.Event], list[audit.Entry]]:
        """Each call onward or refused as decided; the usage events and audit entries to write."""
        spent: list[usage.Event] = []
        refused: list[audit.Entry] = []
        for call, decision in zip(calls, decisions, strict=True):
            record = call.model
            if isinstance(decision, Deny):
                taxonomy, errors, wait = decision.taxonomy_class, decision.errors, decision.retry_after_ms
                result = reject_record(record, taxonomy, errors, STAGE, call.traceparent, now, retry_after_ms=wait)
                out.item("results", record.call.home_partition, result)
                refused.append(_refusal(record, decision, self.set.digest))
                continue
            self._allow(call, decision, now, out)
            if decision.spends:  # counted in `used` by decide_round; written by the round
                spent.append(_event(events[id(call)], decision.spends, record))
        return spent, refused

    def _allow(self, call: Inbound[StageRecord], decision: Allow, now: int, out: Emit) -> None:
        record = call.model
        detail = f"approvals:{decision.required_approvals};spends:{','.join(decision.spends) or '-'}"
        if decision.approver_groups:  # named by the Cedar permits that asked for the approvals
            detail += ";groups:" + ",".join(decision.approver_groups)
        if record.call.dry_run:  # the preview tells where the real call would leave each budget
            detail += ";budgets:" + ",".join(decision.standing)
        detail += ";set:" + self.set.digest  # the policy set that decided it
        out.item(
            "authorized",
            record.call.home_partition,
            record.model_copy(
                update={
                    "traceparent": call.traceparent,
                    "required_approvals": decision.required_approvals,
                    "approver_groups": list(decision.approver_groups),  # the policy's; none: the contract's
                    "decisions": [
                        *record.decisions,
                        StageDecision(stage=STAGE, outcome=StageOutcome.ALLOW, detail=detail, at_ms=now),
                    ],
                }
            ),
        )


class UsageReads:
    """A round's usage reads (store/usage.py) and the policy's `Usage` they make. The value reads
    (store/values.py) are of the calls whose contracts derive a value (contracts/values.py): no
    other call spends one, or has a reservation to find released."""

    def __init__(
        self, calls: list[Inbound[StageRecord]], contracts: dict[int, Contract], event_ids: list[str], policy: Budgets
    ) -> None:
        self.tenants = sorted({c.model.call.tenant_id for c in calls})
        self.runs = sorted(
            {(c.model.call.tenant_id, c.model.call.principal.agent_id, c.model.call.run_id) for c in calls}
        )
        self.event_ids = event_ids
        self.windows: usage.Windows = {}
        for c in calls:
            limit = policy.rate_limit(c.model.call.tenant_id, contracts[id(c)])
            self.windows[(c.model.call.tenant_id, c.model.call.tool_name)] = limit["window_sec"]
        valued = [
            (c.model.call, e) for c, e in zip(calls, event_ids, strict=True) if derivations(contracts[id(c)].binding)
        ]
        self.value_reads = (
            values.reads(
                sorted({call.tenant_id for call, _ in valued}),
                sorted({(call.tenant_id, call.principal.agent_id, call.run_id) for call, _ in valued}),
                [event for _, event in valued],
            )
            if valued
            else []
        )

    def statements(self) -> list[batch.Statement]:
        return [*usage.reads(self.tenants, self.runs, self.event_ids, self.windows), *self.value_reads]

    def usage(self, results: list[batch.Result]) -> Usage:
        valuing = len(self.value_reads)
        valued = values.read(results[-valuing:]) if valuing else values.Read({}, {}, set())
        found = usage.read(self.tenants, results[: len(results) - valuing])
        used = Usage(value_run=valued.per_run, value_day=valued.per_day, released=valued.released)
        used.per_run = found.per_run
        used.per_day = found.per_day
        used.counted = found.counted
        used.rate = recent(found.windows)
        return used


def usage_event(record: StageRecord, is_mutation: bool) -> str:
    """What budgets and rate limits count this call as (toolgate.schemas.hashing): a mutation by its
    operation, once however often retried; a read by its call, once however often sent again
    (execution answers a copy from its first outcome: workers/execution/reads.py)."""
    return operation_event(record.call) if is_mutation else read_event(record.call)


def recent(windows: list[usage.Window]) -> dict[tuple[str, str], Recent]:
    """The rate windows, as the policy's decision reads them."""
    return {(w.tenant_id, w.tool_name): Recent(w.count, w.oldest_ms) for w in windows}


def _event(event_id: str, spends: tuple[str, ...], record: StageRecord) -> usage.Event:
    return usage.Event(
        event_id,
        record.call.tenant_id,
        record.call.principal.agent_id,
        record.call.run_id,
        record.call.tool_name,
        spends,
    )


def _refusal(record: StageRecord, decision: Deny, policy_set: str) -> audit.Entry:
    error = decision.errors[0]
    return audit.Entry(
        STAGE,
        "refused",
        record.call.principal.user_id,
        record.call.call_id,
        record.call.tenant_id,
        {
            "tool": record.call.tool_name,
            "version": record.call.tool_version,
            "taxonomy": str(decision.taxonomy_class),
            "code": error.code,
            "field": error.field,
            "agent": record.call.principal.agent_id,
            "rule": decision.rule,
            "finding": decision.finding,
            "policy_set": policy_set,
        },
    )
