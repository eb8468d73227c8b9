"""A tool's error contract: which taxonomy classes of its calls the agent may repair, may retry,
must treat as fail-closed, and must escalate. Normalization judges every observation of the tool
by it (workers/normalization/decision.py); admission refuses lists the taxonomy forbids
(contracts/honoured.py).

The lists narrow the taxonomy's response vector, never widen what makes a call unsafe:
* repairable: the class's vector says repairable, the stage did not narrow it, and the tool
  lists it in `repairable_errors`;
* retryable: likewise, with `retryable_errors`;
* fail_closed: the vector (or the stage) says so, or the tool lists it in `fail_closed_errors`;
* next action: `escalate` for a class in `escalation_errors` (never also retryable: admission
  refuses a class in both), else what the stage said.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from toolgate.schemas.models import TaxonomyClass

LISTS = ("repairable_errors", "retryable_errors", "fail_closed_errors", "escalation_errors")
ESCALATE = "escalate"


class Judged(NamedTuple):
    repairable: bool
    retryable: bool
    fail_closed: bool
    next_action: str


@dataclass(frozen=True)
class ErrorContract:
    repairable: frozenset[TaxonomyClass]
    retryable: frozenset[TaxonomyClass]
    fail_closed: frozenset[TaxonomyClass]
    escalated: frozenset[TaxonomyClass]

    @classmethod
    def of(cls, lists: Mapping[str, Sequence[str]]) -> ErrorContract:
        """The classes each list names (a name that is no class is left for admission to refuse)."""
        sets = [frozenset(TaxonomyClass[n] for n in lists[name] if n in TaxonomyClass.__members__) for name in LISTS]
        return cls(*sets)

    def judge(self, taxonomy: TaxonomyClass, said: Judged) -> Judged:
        """What an outcome of class `taxonomy` means for this tool, given what its stage `said`."""
        return Judged(
            repairable=said.repairable and taxonomy in self.repairable,
            retryable=said.retryable and taxonomy in self.retryable,
            fail_closed=said.fail_closed or taxonomy in self.fail_closed,
            next_action=ESCALATE if taxonomy in self.escalated else said.next_action,
        )
