"""The semantic gate: cross-field and business rules a contract declares (SEMANTIC_INVALIDITY).

JSON Schema cannot say that a due date must not be in the past or that a charge must be in
its invoice's currency; the binding's `semantic_rules` do, with a small closed vocabulary:
  date_not_past  the date field is today or later (today is passed in, never read here)
  ordered        field `first` <= field `then` (< when strict): dates, numbers, strings
  equals_fact    the field equals a column of a resource another argument names
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from toolgate.contracts.registry import Contract
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
        kind = rule["rule"]
        if kind == "date_not_past":
            value = arguments.get(rule["field"])
            if value is None:
                continue
            try:
                date = dt.date.fromisoformat(str(value))
            except ValueError:
                found.append(
                    FieldError(
                        field=rule["field"],
                        code=f"semantic.{rule['id']}",
                        actual=str(value),
                        expected="an ISO date",
                        message=f"{rule['field']} is not a date",
                    )
                )
                continue
            if date < today:
                found.append(
                    FieldError(
                        field=rule["field"],
                        code=f"semantic.{rule['id']}",
                        actual=str(value),
                        expected=f">= {today.isoformat()}",
                        message=rule["message"],
                    )
                )
        elif kind == "ordered":
            first, then = arguments.get(rule["first"]), arguments.get(rule["then"])
            if first is None or then is None:
                continue
            broken = first >= then if rule.get("strict") else first > then
            if broken:
                found.append(
                    FieldError(
                        field=rule["then"],
                        code=f"semantic.{rule['id']}",
                        message=rule["message"],
                        expected=f"{'after' if rule.get('strict') else 'not before'} {rule['first']}",
                        actual=f"{then} vs {first}",
                    )
                )
        elif kind == "equals_fact":
            key = arguments.get(rule["fact"]["argument"])
            row = owned(facts.get((rule["fact"]["lookup"], key)) if isinstance(key, str) else None, tenant_id)
            if row is None:
                continue  # no such resource of this tenant: the tenant gate (policy) answers that
            if arguments.get(rule["field"]) != row.get(rule["column"]):
                found.append(
                    FieldError(
                        field=rule["field"],
                        code=f"semantic.{rule['id']}",
                        message=rule["message"],
                        expected=str(row.get(rule["column"])),
                        actual=str(arguments.get(rule["field"])),
                    )
                )
    return found
