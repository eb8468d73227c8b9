"""A shadow policy set's decisions beside the enforcing set's (issue 51, part 5). Pure.

A round is decided by the enforcing set; when a shadow set is deployed, the round's same calls
are decided again by `decide_round` with the shadow set, against the same facts and the usage as
it stood before the round (a copy: the enforcing decisions count their spending in theirs). The
two are compared call by call on what an agent would see change: the outcome's class and code
(an allowed call's class is ALLOW) and the approvals it needs. Each disagreement is recorded with
its call. Nothing the shadow decides is published or spent.

The usage the shadow is judged against was read for the enforcing set's rate windows: a shadow
whose budgets.json changes a tool's rate window is judged against the enforcing window's count.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from toolgate.contracts.contract import Contract
from toolgate.contracts.policy_set import PolicySet
from toolgate.schemas.models import StageRecord
from toolgate.workers.policy.case import Allow, Deny, Usage
from toolgate.workers.policy.round_decisions import decide_round
from toolgate.workers.runtime.facts import Facts

ALLOW = "ALLOW"

Outcome = tuple[str, str, int]  # class, code, approvals required


@dataclass(frozen=True)
class Disagreement:
    """A call the shadow set decides otherwise: each side's class, code and approvals."""

    tenant_id: str
    call_id: str
    tool_name: str
    tool_version: str
    enforcing_digest: str
    shadow_digest: str
    enforcing: Outcome
    shadow: Outcome

    def row(self) -> tuple[str | int, ...]:
        """As store/policy_sets.py records it."""
        names = (self.tenant_id, self.call_id, self.tool_name, self.tool_version)
        return (*names, self.enforcing_digest, self.shadow_digest, *self.enforcing, *self.shadow)


def outcome(decision: Allow | Deny) -> Outcome:
    if isinstance(decision, Allow):
        return ALLOW, "", decision.required_approvals
    return str(decision.taxonomy_class), decision.errors[0].code if decision.errors else "", 0


class ShadowRound:
    """One round's shadow: the shadow set and the usage as the round found it."""

    def __init__(self, shadow: PolicySet, used: Usage) -> None:
        self.set = shadow
        self.used = copy.deepcopy(used)

    def disagreements(
        self,
        enforcing_digest: str,
        decided: Sequence[Allow | Deny],
        calls: Sequence[tuple[StageRecord, Contract, str]],
        facts: Facts,
        now_ms: int,
        environment: str,
        quarantined: frozenset[tuple[str, str]],
        domains: Mapping[str, Sequence[str]],
    ) -> list[tuple[str | int, ...]]:
        """The calls the shadow set decides otherwise than `decided` (the enforcing decisions of
        `calls`), as store/policy_sets.py records them."""
        shadow = decide_round(
            self.set.budgets, self.set.cedar, calls, facts, self.used, now_ms, environment, quarantined, domains
        )
        found: list[tuple[str | int, ...]] = []
        for (record, _, _), theirs, ours in zip(calls, decided, shadow, strict=True):
            enforcing, candidate = outcome(theirs), outcome(ours)
            if enforcing != candidate:
                call = record.call
                names = (call.tenant_id, call.call_id, call.tool_name, call.tool_version)
                found.append(Disagreement(*names, enforcing_digest, self.set.digest, enforcing, candidate).row())
        return found
