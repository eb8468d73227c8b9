"""Values a call spends (issue 51, part 2): what a contract's binding derives from a call's
arguments for the policy set's value budgets (budgets.json `value_budgets`). Pure.

A binding's `values` lists derivations, each a value dimension and how to measure it:

    {"dimension": "money", "sum": "amount_cents", "unit": "currency"}  -> {"money:USD": 125000}
    {"dimension": "recipients", "count": "to"}                         -> {"recipients": 1}

`sum` adds an integer argument (money in minor units); `count` counts an argument (an array's
items, a string present is one); `unit` names a string argument whose value qualifies the
dimension, so money is budgeted by currency. Two derivations of one dimension add up.

Admission (`problems`) refuses a derivation that could be made to spend nothing, or a value no
budget could name: a `sum` argument must be a required integer that cannot be negative; a
`count` argument an array or a string; a `unit` argument a required string with an enum of
plain names (the dimensions a budget can name are known when the contract is admitted).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from toolgate.contracts.contract import Contract

UNIT = re.compile(r"^[A-Za-z0-9_]{1,16}$")


def derivations(binding: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list(binding.get("values", ()))


def derive(binding: Mapping[str, Any], arguments: Mapping[str, Any]) -> dict[str, int]:
    """{value dimension: amount} a call with these arguments spends (positive amounts only)."""
    spent: dict[str, int] = {}
    for rule in derivations(binding):
        amount = _amount(rule, arguments)
        if amount <= 0:
            continue
        dimension = rule["dimension"]
        if "unit" in rule:
            dimension = f"{dimension}:{arguments.get(rule['unit'])}"
        spent[dimension] = spent.get(dimension, 0) + amount
    return spent


def spent_values(contract: Contract, arguments: Mapping[str, Any]) -> dict[str, int]:
    """What a call of `contract` with these arguments spends of each value dimension."""
    return derive(contract.binding, arguments)


def _amount(rule: Mapping[str, Any], arguments: Mapping[str, Any]) -> int:
    if "sum" in rule:
        value = arguments.get(rule["sum"])
        return value if isinstance(value, int) and not isinstance(value, bool) else 0
    value = arguments.get(rule["count"])
    if isinstance(value, list):
        return len(value)
    return 1 if isinstance(value, str) else 0


def problems(name: str, version: str, binding: Mapping[str, Any], input_schema: Mapping[str, Any]) -> list[str]:
    """Why the binding's value derivations cannot be admitted (empty: they can)."""
    properties = input_schema.get("properties", {})
    required = set(input_schema.get("required", []))
    found = []
    for i, rule in enumerate(derivations(binding)):
        where = f"binding.values[{i}] of {name} {version}"
        for key, check in (("sum", _sum_problem), ("count", _count_problem), ("unit", _unit_problem)):
            if key in rule:
                argument = rule[key]
                problem = check(properties.get(argument), argument in required)
                if problem:
                    found.append(f"{where} names {key} {argument!r}, {problem}")
    return found


def _sum_problem(schema: Any, required: bool) -> str | None:
    if not isinstance(schema, Mapping) or schema.get("type") != "integer":
        return "which is not an integer in the input schema: a value is summed from an integer argument"
    if not required:
        return "which the input schema does not require: a call could leave it out and spend nothing"
    minimum = schema.get("minimum")
    if not isinstance(minimum, int) or minimum < 0:
        return "whose input schema allows a negative amount: give it a minimum of 0 or more"
    return None


def _count_problem(schema: Any, required: bool) -> str | None:
    del required  # an argument left out counts nothing, as it names nobody
    if not isinstance(schema, Mapping) or schema.get("type") not in ("array", "string"):
        return "which is not an array or a string in the input schema: a count counts items"
    return None


def _unit_problem(schema: Any, required: bool) -> str | None:
    if not isinstance(schema, Mapping) or schema.get("type") != "string":
        return "which is not a string in the input schema: a unit names the value's kind"
    if not required:
        return "which the input schema does not require: a value without its unit matches no budget"
    enum = schema.get("enum")
    if not isinstance(enum, list) or not enum or not all(isinstance(v, str) and UNIT.match(v) for v in enum):
        return "which has no enum of plain names (letters, digits, _): a budget must be able to name each unit"
    return None
