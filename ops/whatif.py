"""What-if over history (issue 51, part 6): the recorded decisions (toolgate.call_decisions)
replayed under a candidate policy set, and contracts, through the stages' pure decisions. Pure:
no Postgres, no Kafka, no clock; `toolgate whatif` (ops/call_records.py) reads the rows, a part
of the window at a time (`replay` adds each part to one report, which keeps counts and a few
examples: a window of any length in bounded memory), and prints the report.

Each recorded policy decision is decided again as the policy stage would: `decide_round` with
the candidate set's budgets and Cedar policies, on the call as validated, the facts the round
read (the environment, the time, quarantine, the tenant's mail domains, the resources' rows) and
the usage it saw. With candidate contracts, the call's arguments are first checked again by
validation's pure decision (`workers/validation/decision.py` `decide`) against them: a call
they refuse is refused there; one they pass goes on to the policy with the contract they resolve.

What a replay cannot know, said in the report's `assumed`:
* **usage as recorded.** Each call is judged against the run's and tenant's counts and the rate
  window it saw when it was decided. A call the candidate would refuse did not spend, in
  history, what it spent, nor does one it would allow spend what it did not: the counts later
  calls are judged against are not re-derived.
* **facts as recorded**, the round's time and environment included; a resource a candidate
  contract looks up that the record does not hold is treated as missing.
* validation's semantic rules are not checked again (their facts are not recorded), and a call
  validation refused is not replayed (its arguments are not recorded): its outcome is kept.
* the tool version validation resolved is the one asked for again (a `latest` call asks for the
  version it resolved to then).
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from toolgate.contracts.contract import Contract
from toolgate.contracts.policy_set import PolicySet
from toolgate.contracts.registry import Registry
from toolgate.schemas.identity import identity_of
from toolgate.schemas.models import Call, StageRecord, ToolProposal
from toolgate.store.rows import Decided
from toolgate.workers.policy.case import Allow, Deny, Recent, Usage
from toolgate.workers.policy.decision import refs
from toolgate.workers.policy.round_decisions import decide_round
from toolgate.workers.runtime.facts import Facts, Rows
from toolgate.workers.validation import decision as validation

EXAMPLES = 5
ELSEWHERE = {"tenant_id": None}  # another tenant's row for the id: the record keeps only that there was one


@dataclass(frozen=True)
class Outcome:
    """A decision as the report compares them."""

    allowed: bool
    taxonomy_class: str | None = None
    code: str | None = None
    rule: str | None = None
    approvals: int = 0

    def text(self) -> str:
        if self.allowed:
            return f"allowed, {self.approvals} approvals"
        return f"refused {self.taxonomy_class} {self.code}" + (f" ({self.rule})" if self.rule else "")


def recorded(row: Decided) -> Outcome:
    if row.outcome == "refuse":
        return Outcome(False, row.taxonomy_class, row.code, row.rule)
    return Outcome(True, approvals=row.approvals or 0)


def decided(decision: Allow | Deny | validation.Reject) -> Outcome:
    if isinstance(decision, Allow):
        return Outcome(True, approvals=decision.required_approvals)
    code = decision.errors[0].code if decision.errors else None
    return Outcome(False, str(decision.taxonomy_class), code, getattr(decision, "rule", None))


def change_of(before: Outcome, after: Outcome) -> str | None:
    """How an outcome changed, or None."""
    if before.allowed and not after.allowed:
        return "allowed -> refused"
    if not before.allowed and after.allowed:
        return "refused -> allowed"
    if before.allowed and before.approvals != after.approvals:
        return "approvals changed"
    if not before.allowed and (before.taxonomy_class, before.code) != (after.taxonomy_class, after.code):
        return "refusal changed"
    return None


def facts_of(row: Decided) -> Facts:
    found: dict[tuple[str, str], Rows] = {}
    for r in (row.facts or {}).get("resources", []):
        found[(r["lookup"], r["id"])] = [r["row"]] if r["row"] is not None else [ELSEWHERE] if r["elsewhere"] else []
    return found


def usage_of(row: Decided) -> Usage:
    """The usage the call saw, as the decision reads it (its run's, its tenant's day, its rate
    window, the value reserved of the dimensions it spends)."""
    call, seen = row.call or {}, row.usage or {}
    tenant, agent, run = row.tenant_id, call.get("principal", {}).get("agent_id", ""), call.get("run_id", "")
    used = Usage()
    used.per_run = {(tenant, agent, run, d): n for d, n in seen.get("run", {}).items()}
    used.per_day = {(tenant, d): n for d, n in seen.get("tenant_today", {}).items()}
    rate = seen.get("rate") or {}
    used.rate = {(tenant, row.tool_name): Recent(rate.get("count", 0), rate.get("oldest_ms"))}
    used.counted = {seen["event_id"]} if seen.get("counted_before") else set()
    used.value_run = {(tenant, agent, run, d): n for d, n in seen.get("values_run", {}).items()}
    used.value_day = {(tenant, d): n for d, n in seen.get("values_today", {}).items()}
    used.released = {seen["event_id"]} if seen.get("released") else set()
    return used


@dataclass
class Change:
    tool: str
    kind: str
    taxonomy_class: str  # the refusal's class (the candidate's for allowed -> refused, else the recorded)
    count: int = 0
    examples: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Report:
    recorded_sets: Counter[str] = field(default_factory=Counter)  # policy set digest -> calls
    candidate: str = ""
    replayed: int = 0
    unchanged: int = 0
    changes: dict[tuple[str, str, str], Change] = field(default_factory=dict)
    assumed: Counter[str] = field(default_factory=Counter)

    def note(self, row: Decided, before: Outcome, after: Outcome) -> None:
        self.replayed += 1
        kind = change_of(before, after)
        if kind is None:
            self.unchanged += 1
            return
        cls = (after if kind == "allowed -> refused" else before).taxonomy_class or "SUCCESS"
        change = self.changes.setdefault((row.tool_name, kind, cls), Change(row.tool_name, kind, cls))
        change.count += 1
        if len(change.examples) < EXAMPLES:
            change.examples.append(
                {"call_id": row.call_id, "tenant": row.tenant_id, "was": before.text(), "would be": after.text()}
            )

    def as_json(self) -> dict[str, Any]:
        return {
            "candidate": self.candidate,
            "recorded_sets": dict(self.recorded_sets),
            "replayed": self.replayed,
            "unchanged": self.unchanged,
            "changed": sum(c.count for c in self.changes.values()),
            "changes": [
                vars(c) for c in sorted(self.changes.values(), key=lambda c: (c.tool, c.kind, c.taxonomy_class))
            ],
            "assumed": [f"{text} ({n} calls)" if n else text for text, n in sorted(self.assumed.items())],
        }


USAGE = (
    "usage as recorded: each call judged against the run and tenant-day counts and the rate window it saw; "
    "what the candidate would have spent differently before it is not carried to later calls"
)
FACTS = "facts, time and environment as recorded: the resources' rows, quarantine and mail domains the round read"
SEMANTIC = "validation's semantic rules not checked again (their facts are not recorded)"
VALIDATION_REFUSED = "refused by validation: not replayed (its arguments are not recorded), kept refused"
NO_CALL = "recorded without the call it judged: not replayed"
NO_CONTRACT = "tool version not among the contracts: not replayed"
UNRECORDED = "a resource the contract looks up that the record does not hold: treated as missing"


def record_of(row: Decided) -> StageRecord:
    return StageRecord(traceparent="", call=Call.model_validate(row.call))


def revalidated(
    record: StageRecord, contracts: Registry, now_ms: int
) -> tuple[StageRecord, Contract] | validation.Reject:
    """The call's arguments checked again by validation's pure gates against `contracts`: the call
    as it would be validated now (its contract, canonical arguments, payload hash), or the refusal."""
    call = record.call
    proposal = ToolProposal(
        **identity_of(call),
        logical_operation_id=call.logical_operation_id,
        tool_name=call.tool_name,
        tool_version=call.tool_version,
        arguments=json.dumps(call.arguments),
        dry_run=call.dry_run,
    )
    outcome = validation.decide(proposal, contracts, dt.datetime.fromtimestamp(now_ms / 1000, dt.UTC).date())
    if isinstance(outcome, validation.Reject):
        return outcome
    update = {
        "tool_version": outcome.contract.version,
        "arguments": outcome.arguments,
        "payload_hash": outcome.payload_hash,
    }
    return replace_call(record, update), outcome.contract


def replace_call(record: StageRecord, update: dict[str, Any]) -> StageRecord:
    return StageRecord(traceparent="", call=Call.model_validate({**record.call.model_dump(), **update}))


def replay_one(
    row: Decided, contracts: Registry, candidate: PolicySet, revalidate: bool, report: Report
) -> Outcome | None:
    """The candidate's outcome for one recorded policy decision, or None (the reason noted)."""
    if row.call is None or row.facts is None or row.usage is None:
        report.assumed[NO_CALL] += 1
        return None
    record = record_of(row)
    facts = row.facts
    now, environment = int(facts["now_ms"]), str(facts["environment"])
    if revalidate:
        checked = revalidated(record, contracts, now)
        if isinstance(checked, validation.Reject):
            return decided(checked)
        record, contract = checked
    else:
        try:
            contract = contracts.get(row.tool_name, row.tool_version)
        except KeyError:
            report.assumed[NO_CONTRACT] += 1
            return None
    known = facts_of(row)
    if any(isinstance(v, str) and (lookup, v) not in known for lookup, v in refs(record, contract)):
        report.assumed[UNRECORDED] += 1
    quarantined = frozenset({(record.call.tool_name, record.call.tool_version)} if facts.get("quarantined") else ())
    domains = {row.tenant_id: tuple(facts.get("domains", ()))}
    event_id = str((row.usage or {}).get("event_id", ""))
    (decision,) = decide_round(
        candidate.budgets,
        candidate.cedar,
        [(record, contract, event_id)],
        known,
        usage_of(row),
        now,
        environment,
        quarantined,
        domains,
    )
    return decided(decision)


def report_for(candidate: PolicySet, revalidate: bool) -> Report:
    """An empty report of a replay under `candidate`, naming what every replay assumes."""
    report = Report(candidate=candidate.digest)
    report.assumed[USAGE] = 0
    report.assumed[FACTS] = 0
    if revalidate:
        report.assumed[SEMANTIC] = 0
    return report


def replay(
    rows: Iterable[Decided],
    contracts: Registry,
    candidate: PolicySet,
    revalidate: bool,
    report: Report | None = None,
) -> Report:
    """Every recorded decision of `rows` (both stages') under the candidate: what would change,
    added to `report` (a window read in parts is replayed part by part into one report)."""
    report = report or report_for(candidate, revalidate)
    for row in rows:
        if row.stage == "validation":
            if row.outcome == "refuse":
                report.assumed[VALIDATION_REFUSED] += 1
            continue
        report.recorded_sets[row.policy_digest or "unknown"] += 1
        after = replay_one(row, contracts, candidate, revalidate, report)
        if after is not None:
            report.note(row, recorded(row), after)
    return report


UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}


def duration_s(text: str) -> float:
    """`24h`, `30m`, `7d`, `90s` (or plain seconds) in seconds; ValueError otherwise."""
    text = text.strip().lower()
    unit = UNITS.get(text[-1:]) if text else None
    number = text[:-1] if unit else text
    seconds = float(number) * (unit or 1)
    if not seconds > 0:
        raise ValueError(f"{text!r} is not a duration like 24h, 30m, 7d")
    return seconds
