"""A JSON policy document (the format before issue 51) as a Cedar policy set and a budgets file. Pure.

`toolgate policy convert policy.json DIR` writes what this returns. Each rule becomes one Cedar
policy named by its `id`:

* `"effect": "deny"` -> a `forbid` with the rule's `message` as `@message`;
* `"effect": "require_approvals"` -> a `permit` with `@approvals("N")` whose conditions also
  require `principal in resource.tenant` (as the baseline does), its message kept as a comment;
* `when`, every key of which must hold: `side_effect_class` and `tool` become the action scope
  (`action in [Action::"CRITICAL_MUTATION", ...]`; when both are named the tools are the scope and
  the classes a condition), `data_classification`, `egress_policy` and `environment` conditions
  on the context, `tenant` a `principal in Tenant::"t"`, and `outside_hours_utc: "HH:MM-HH:MM"`
  the minutes of the UTC day outside the window (`context.time.minute_of_day_utc`, compared as the
  JSON rules compared "HH:MM" strings: a window that ends before it starts is never inside).

A baseline permit comes first: the JSON rules allowed every call no rule denied, and a Cedar set
denies every call no permit applies to. Budgets, rate-limit grants and repair limits are not
rules: they go, unchanged, to `budgets.json`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator

from toolgate.contracts.admission import ContractRefused
from toolgate.contracts.budgets import admit

RULES_FILE = "rules.cedar"
BUDGETS_FILE = "budgets.json"
CONTEXT_FACTS = ("data_classification", "egress_policy", "environment")
ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}

_RULES_SCHEMA = Draft202012Validator(
    json.loads(resources.files("toolgate.contracts").joinpath("json-rules.schema.json").read_text())
)

BASELINE = """\
@id("baseline")
permit (principal, action, resource)
when { principal in resource.tenant };
"""

HEADER = """\
// Converted from {source} by `toolgate policy convert`: the JSON rules, in Cedar.
// Default deny: a call runs only when a permit applies and no forbid does; the baseline permit
// below allows, as the JSON rules did, every call of an agent inside its tenant that no forbid refuses.
"""


def admit_json_policy(document: Any, source: str) -> dict[str, Any]:
    """A JSON policy document admitted as 0.2.0 admitted it (its rules against
    json-rules.schema.json, the rest as budgets), or ContractRefused naming every problem."""
    problems = [
        f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in _RULES_SCHEMA.iter_errors(document)
    ]
    problems += [
        f"rules: {rule['id']} requires approvals but says not how many"
        for rule in (document.get("rules", []) if not problems else [])
        if rule["effect"] == "require_approvals" and "approvals" not in rule
    ]
    if problems:
        raise ContractRefused(f"{source}: policy refused: " + "; ".join(problems))
    admit({key: value for key, value in document.items() if key != "rules"}, source)
    return dict(document)


def convert(document: Mapping[str, Any], source: str) -> dict[str, str]:
    """The files of the Cedar set (by name) that decide as `document`'s rules did, and its budgets."""
    policies = [BASELINE, *(_policy(rule) for rule in document["rules"])]
    budgets = {key: value for key, value in document.items() if key != "rules"}
    return {
        RULES_FILE: HEADER.format(source=source) + "\n" + "\n".join(policies),
        BUDGETS_FILE: json.dumps(budgets, indent=2) + "\n",
    }


def _policy(rule: Mapping[str, Any]) -> str:
    when: Mapping[str, Any] = rule["when"]
    scope, conditions = _action(when), _conditions(when)
    lines = [f"@id({_string(rule['id'])})"]
    if rule["effect"] == "deny":
        lines += [f"@message({_string(rule['message'])})", f"forbid (principal, {scope}, resource)"]
    else:
        lines = [f"// {line}" for line in str(rule["message"]).splitlines()] + lines
        lines += [f'@approvals("{int(rule["approvals"])}")', f"permit (principal, {scope}, resource)"]
        conditions = ["principal in resource.tenant", *conditions]
    if conditions:
        lines.append("when { " + " && ".join(conditions) + " }")
    return "\n".join(lines) + ";\n"


def _action(when: Mapping[str, Any]) -> str:
    named = when.get("tool") or when.get("side_effect_class")
    if not named:
        return "action"
    return "action in [" + ", ".join(f"Action::{_string(name)}" for name in named) + "]"


def _conditions(when: Mapping[str, Any]) -> list[str]:
    conditions = []
    if "tool" in when and "side_effect_class" in when:  # the tools are the scope: the class a condition
        conditions.append(_one_of("context.side_effect_class", when["side_effect_class"]))
    conditions += [_one_of(f"context.{fact}", when[fact]) for fact in CONTEXT_FACTS if fact in when]
    if "tenant" in when:
        tenants = [f"principal in Tenant::{_string(t)}" for t in when["tenant"]]
        conditions.append(tenants[0] if len(tenants) == 1 else "(" + " || ".join(tenants) + ")")
    if "outside_hours_utc" in when:
        start, end = (_minute(t) for t in str(when["outside_hours_utc"]).split("-"))
        minute = "context.time.minute_of_day_utc"
        conditions.append(f"({minute} < {start} || {minute} >= {end})")
    return conditions


def _one_of(path: str, values: Sequence[str]) -> str:
    if len(values) == 1:
        return f"{path} == {_string(values[0])}"
    return "[" + ", ".join(_string(v) for v in values) + f"].contains({path})"


def _minute(clock: str) -> int:
    hours, minutes = clock.split(":")
    return int(hours) * 60 + int(minutes)


def _string(text: str) -> str:
    """A Cedar string literal: quotes and backslashes escaped, control characters as `\\u{..}`."""
    escaped = "".join(ESCAPES.get(ch) or (f"\\u{{{ord(ch):x}}}" if ord(ch) < 0x20 else ch) for ch in text)
    return f'"{escaped}"'
