"""The semantic gate: cross-field and business rules a contract declares (SEMANTIC_INVALIDITY).

JSON Schema cannot say that a due date must not be in the past or that a charge must be in
its invoice's currency; the binding's `semantic_rules` do, with a small closed vocabulary:
  date_not_past  the date field is today or later (today is passed in, never read here)
  ordered        field `first` <= field `then` (< when strict): dates, numbers, strings
  equals_fact    the field equals a column of a resource another argument names
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from toolgate.contracts.contract import Contract
from toolgate.schemas.models import FieldError
from toolgate.workers.runtime.facts import Facts, owned


def refs(arguments: Mapping[str, Any], contract: Contract) -> list[tuple[str, Any]]:
    return [
        (r["fact"]["lookup"], arguments.get(r["fact"]["argument"]))
        for r in contract.binding.get("semantic_rules", [])
        if r["rule"] == "equals_fact"
    ]


def findings(
    arguments: Mapping[str, Any], contract: Contract, facts: Facts, today: dt.date, tenant_id: str
) -> list[FieldError]:
    """What breaks the contract's rules. Facts about another tenant's resources count as
    absent: a rule never compares against, or reveals, what the caller may not see."""
    found = []
    for rule in contract.binding.get("semantic_rules", []):
        check = RULES.get(rule["rule"])
        error = check(Rule(rule, arguments, facts, today, tenant_id)) if check is not None else None
        if error is not None:
            found.append(error)
    return found


@dataclass(frozen=True)
class Rule:
    """One rule of the contract, with what it is checked against."""

    rule: Mapping[str, Any]
    arguments: Mapping[str, Any]
    facts: Facts
    today: dt.date
    tenant_id: str

    def broken(self, field: str, message: str, expected: str, actual: str) -> FieldError:
        return FieldError(
            field=field, code=f"semantic.{self.rule['id']}", message=message, expected=expected, actual=actual
        )


def date_not_past(r: Rule) -> FieldError | None:
    field = r.rule["field"]
    value = r.arguments.get(field)
    if value is None:
        return None
    try:
        date = dt.date.fromisoformat(str(value))
    except ValueError:
        return r.broken(field, f"{field} is not a date", "an ISO date", str(value))
    if date < r.today:
        return r.broken(field, r.rule["message"], f">= {r.today.isoformat()}", str(value))
    return None


def ordered(r: Rule) -> FieldError | None:
    rule = r.rule
    first, then = r.arguments.get(rule["first"]), r.arguments.get(rule["then"])
    if first is None or then is None:
        return None
    strict = rule.get("strict")
    if not (first >= then if strict else first > then):
        return None
    expected = f"{'after' if strict else 'not before'} {rule['first']}"
    return r.broken(rule["then"], rule["message"], expected, f"{then} vs {first}")


def equals_fact(r: Rule) -> FieldError | None:
    rule = r.rule
    key = r.arguments.get(rule["fact"]["argument"])
    row = owned(r.facts.get((rule["fact"]["lookup"], key)) if isinstance(key, str) else None, r.tenant_id)
    if row is None:
        return None  # no such resource of this tenant: the tenant gate (policy) answers that
    if r.arguments.get(rule["field"]) == row.get(rule["column"]):
        return None
    return r.broken(rule["field"], rule["message"], str(row.get(rule["column"])), str(r.arguments.get(rule["field"])))


RULES: dict[str, Callable[[Rule], FieldError | None]] = {
    "date_not_past": date_not_past,
    "ordered": ordered,
    "equals_fact": equals_fact,
}
