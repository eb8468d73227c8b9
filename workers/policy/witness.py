"""What each policy decision of a round was judged on, as its record (issue 51, part 3). Pure.

A round's decisions are made in order, each against the usage the round's earlier calls left
(round_decisions.py). `Witness.watch` passes them through as the handler takes them, noting
before each the usage its call is about to be judged against; `rows` then makes the round's
records (store/rows.py `Decided`), for toolgate.call_decisions:

* the policy's decision: the policy set's and the contracts' digests, the outcome (allow or
  refuse, taxonomy class, code, rule, approvals and approver groups) and its inputs: `record`,
  the StageRecord's bytes as the stage read them, which hold the call as validation admitted it
  (canonical arguments) and validation's StageDecision on it, naming the contracts digest it
  decided by (no second row for validation's pass, nothing serialized again); `facts`, the
  environment, the time, whether its tool version was quarantined, its tenant's mail domains,
  and the rows the round's lookups found for the resources it names (its own tenant's row only,
  and whether another tenant has one: the gate's `cross_tenant` finding); `usage`, its run's and
  its tenant's day counts by dimension, its tool's rate window, and whether its operation was
  counted before.

`opened` is the other way: a stored row as `toolgate policy decided` and `toolgate whatif` read
it, the record decoded into `call` and validation's pass of it (its own row, as validation's
StageDecision on the call names it: the contracts digest and the time).

Nothing secret-shaped is shown: arguments carry references only (a call holds no secret: they
are referenced, and execution resolves them), and besides, wherever a decision's inputs are
written out as JSON (the facts' rows; the call, when opened) values under a key named like a
secret (password, token, api_key, ...) are replaced by `[REDACTED]` and every value the process
registered as a secret is scrubbed (toolgate.scrubber, passed in as `scrub`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from toolgate.contracts.budgets import Budgets
from toolgate.contracts.cedar_schema import DIMENSIONS
from toolgate.contracts.contract import Contract
from toolgate.contracts.values import spent_values
from toolgate.schemas.codec import codec
from toolgate.schemas.models import StageRecord
from toolgate.store.rows import Decided
from toolgate.workers.policy.case import Allow, Deny, Usage, run_of
from toolgate.workers.policy.decision import refs
from toolgate.workers.runtime.facts import Facts, owned

MARK = "[REDACTED]"
SECRET_NAMES = re.compile(
    r"pass(word|phrase)|secret|token|api[_-]?key|authori[sz]ation|credential|private[_-]?key|cookie", re.IGNORECASE
)
CONTRACTS = "contracts:"  # how validation's StageDecision detail names the contracts that decided
Scrub = Callable[[Any], Any]


@functools.lru_cache(maxsize=4096)  # the names are the contracts' arguments and the lookups' columns
def secret_named(key: Any) -> bool:
    return SECRET_NAMES.search(str(key)) is not None


def redact(value: Any, scrub: Scrub) -> Any:
    """`value` as JSON (a value JSON has no form for as its text), every value under a secret-named
    key replaced, and registered secrets scrubbed."""

    return scrub(_walk(value))


PLAIN = (str, int, float, bool, type(None))


def _walk(v: Any) -> Any:
    if type(v) in PLAIN:
        return v
    if isinstance(v, Mapping):
        if all(type(x) in PLAIN for x in v.values()) and not any(map(secret_named, v)):
            return v  # the common case, a flat document with nothing to redact: kept as it is
        return {k: MARK if secret_named(k) else _walk(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_walk(x) for x in v]
    return v if isinstance(v, PLAIN) else str(v)  # a lookup's date, time or decimal: JSON has no form for it


@dataclass(frozen=True)
class Inputs:
    """What a round read that every decision of it was judged on."""

    facts: Facts
    environment: str
    now_ms: int
    quarantined: frozenset[tuple[str, str]]
    domains: Mapping[str, Sequence[str]]
    budgets: Budgets


def usage_seen(record: StageRecord, contract: Contract, event_id: str, used: Usage, budgets: Budgets) -> dict[str, Any]:
    """The usage a call is judged against, as it stands before its decision."""
    tenant, agent, run = run_of(record)
    recent = used.rate.get((tenant, record.call.tool_name))
    valued = spent_values(contract, record.call.arguments)  # the value budgets' dimensions it spends
    return {
        "run": {d: n for d in DIMENSIONS if (n := used.per_run.get((tenant, agent, run, d), 0))},
        "tenant_today": {d: n for d in DIMENSIONS if (n := used.per_day.get((tenant, d), 0))},
        "rate": {
            "count": recent.count if recent else 0,
            "oldest_ms": recent.oldest_ms if recent else None,
            "window_sec": budgets.rate_limit(tenant, contract)["window_sec"],
        },
        "values_run": {d: n for d in valued if (n := used.value_run.get((tenant, agent, run, d), 0))},
        "values_today": {d: n for d in valued if (n := used.value_day.get((tenant, d), 0))},
        "event_id": event_id,
        "counted_before": event_id in used.counted,
        "released": event_id in used.released,  # its value released without its operation ending
    }


Resource = dict[str, Any]  # a resource as a record names it: its lookup, id, row and whether elsewhere


def facts_seen(
    record: StageRecord, contract: Contract, inputs: Inputs, scrub: Scrub, written: dict[tuple[str, str, str], Resource]
) -> dict[str, Any]:
    """The facts a call is judged on: the round's, and its resources' rows (its own tenant's only;
    each written out once a round, in `written`, however many of the round's calls name it)."""
    call = record.call
    resources = []
    for lookup, value in dict.fromkeys((k, v) for k, v in refs(record, contract) if isinstance(v, str)):  # once each
        key = (lookup, value, call.tenant_id)
        if key not in written:
            rows = inputs.facts.get((lookup, value))
            row = owned(rows, call.tenant_id)
            found = redact(dict(row), scrub) if row is not None else None
            written[key] = {"lookup": lookup, "id": value, "row": found, "elsewhere": bool(rows) and row is None}
        resources.append(written[key])
    return {
        "environment": inputs.environment,
        "now_ms": inputs.now_ms,
        "quarantined": (call.tool_name, call.tool_version) in inputs.quarantined,
        "domains": list(inputs.domains.get(call.tenant_id, ())),
        "resources": resources,
    }


def call_seen(record: StageRecord, scrub: Scrub) -> dict[str, Any]:
    """The call as validated, its arguments redacted (the rest is identity, hashes and ids)."""
    seen = record.call.model_dump(mode="json")
    seen["arguments"] = redact(seen["arguments"], scrub)
    return seen


def validation_row(record: StageRecord) -> Decided | None:
    """Validation's pass of the call, from its StageDecision (None when the record carries none)."""
    call = record.call
    for d in record.decisions:
        if d.stage == "validation":
            detail = d.detail or ""
            digest = detail[len(CONTRACTS) :] if detail.startswith(CONTRACTS) else None
            return Decided(
                call.tenant_id,
                call.call_id,
                "validation",
                d.at_ms,
                call.tool_name,
                call.tool_version,
                digest,
                None,
                "pass",
            )
    return None


class Witness:
    """A round's decisions and what each was judged on (`calls`: record, contract, usage event id,
    in the round's order; `read`: each record's bytes as the stage read them, in the same order;
    `used`: the round's usage, which decide_round keeps current)."""

    def __init__(
        self,
        calls: Sequence[tuple[StageRecord, Contract, str]],
        read: Sequence[bytes],
        used: Usage,
        inputs: Inputs,
        scrub: Scrub,
    ) -> None:
        self.calls, self.read, self.used, self.inputs, self.scrub = calls, read, used, inputs, scrub
        self.seen: list[tuple[dict[str, Any], Allow | Deny]] = []

    def watch(self, decisions: Iterator[Allow | Deny]) -> Iterator[Allow | Deny]:
        """`decisions` as they come, each noted with the usage its call saw before it was decided."""
        for record, contract, event_id in self.calls:
            seen = usage_seen(record, contract, event_id, self.used, self.inputs.budgets)
            decision = next(decisions)
            self.seen.append((seen, decision))
            yield decision

    def rows(self, set_digest: str, contracts_digest: str) -> list[Decided]:
        """The records of the decisions watched so far."""
        written: dict[tuple[str, str, str], Resource] = {}
        found: list[Decided] = []
        for (record, contract, _), read, (usage, decision) in zip(self.calls, self.read, self.seen, strict=False):
            call = record.call
            found.append(
                Decided(
                    call.tenant_id,
                    call.call_id,
                    "policy",
                    self.inputs.now_ms,
                    call.tool_name,
                    call.tool_version,
                    contracts_digest,
                    set_digest,
                    **_outcome(decision),
                    facts=facts_seen(record, contract, self.inputs, self.scrub, written),
                    usage=usage,
                    record=read,
                )
            )
        return found


def opened(row: Decided, scrub: Scrub) -> list[Decided]:
    """A stored row as its readers show it: a policy row's record decoded into the call as validated
    (`call`, its arguments redacted), after validation's pass of it as the record names it."""
    if row.record is None:
        return [row]
    record = codec().decode(bytes(row.record), StageRecord)
    passed = validation_row(record)
    return [*([passed] if passed is not None else []), replace(row, call=call_seen(record, scrub), record=None)]


def _outcome(decision: Allow | Deny) -> dict[str, Any]:
    """The decision's outcome, as Decided's fields name it."""
    if isinstance(decision, Allow):
        return {
            "outcome": "allow",
            "approvals": decision.required_approvals,
            "approver_groups": list(decision.approver_groups),
        }
    code = decision.errors[0].code if decision.errors else None
    return {"outcome": "refuse", "taxonomy_class": str(decision.taxonomy_class), "code": code, "rule": decision.rule}
