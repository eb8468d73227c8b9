"""What admission checks in a binding beyond its JSON Schema: the rules that keep a contract
author's omission from failing open. Pure: text in, problems out.

    every lookup        selects a column named tenant_id: the gates read a row as the caller's
                        only when its tenant_id says so (workers/runtime/facts.owned), so a
                        lookup without one would make every row nobody's, and every call that
                        needs it refused
    tenant_binding      names an argument the input schema requires: a tenant-bound argument that
                        may be left out would name no resource the tenant gate could check; the
                        attributes it offers Cedar policies (`resource.NAME`) are columns its
                        lookup selects, and not `tenant` (every resource's own tenant)
    every statement     names only the context a call gives (`%(ctx.NAME)s`, CONTEXT): never the
                        caller's raw idempotency key, which two tenants may both choose; an id
                        derived from a key comes from ctx.operation_key, bound to the tenant

A lookup's select list is read from its text: the output names of the items of its outermost
SELECT (an alias after AS, a column, the last part of a qualified column, an implicit alias). A
`*` names nothing here: select tenant_id by name. The reading is conservative; what it cannot
read as selecting tenant_id is refused, with a message that says what to write.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

# What a statement's %(ctx.NAME)s may name (workers/execution/effects.py Job.context gives them).
CONTEXT = ("tenant_id", "user_id", "agent_id", "call_id", "run_id", "operation_key")
CTX = re.compile(r"%\(ctx\.([^)]*)\)s")
IDENT = r'(?:"[^"]+"|[A-Za-z_][A-Za-z0-9_$]*)'
ALIASED = re.compile(rf"(?is)^.+?\s+AS\s+({IDENT})$")
COLUMN = re.compile(rf"(?s)^(?:{IDENT}\s*\.\s*)*({IDENT})$")
IMPLICIT = re.compile(rf"(?s)^.*[A-Za-z0-9_$\")\]]\s+({IDENT})$")
KEYWORDS = frozenset({"distinct", "all", "from", "end", "null", "true", "false", "and", "or", "not", "is"})


def lookups(binding: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(where, lookup text) of every lookup a binding names."""
    for i, bound in enumerate(binding.get("tenant_binding", [])):
        yield f"binding.tenant_binding[{i}].lookup", bound["lookup"]
    for i, check in enumerate(binding.get("state_checks", [])):
        yield f"binding.state_checks[{i}].fact.lookup", check["fact"]["lookup"]
    for i, rule in enumerate(binding.get("semantic_rules", [])):
        if "fact" in rule:
            yield f"binding.semantic_rules[{i}].fact.lookup", rule["fact"]["lookup"]
    before = (binding.get("confirmation") or {}).get("before_state")
    if before:
        yield "binding.confirmation.before_state.lookup", before["lookup"]


def statements(binding: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(where, statement text) of every statement a binding runs."""
    executor = binding.get("executor") or {}
    if executor.get("kind") == "postgres":
        yield "binding.executor.statement", executor["statement"]
    if binding.get("after_effect"):
        yield "binding.after_effect.statement", binding["after_effect"]["statement"]


def problems(name: str, version: str, binding: Mapping[str, Any], input_schema: Mapping[str, Any]) -> list[str]:
    """Why this binding would fail open (empty: it would not), each naming the contract and field."""
    return tenancy_problems(name, version, binding, input_schema) + context_problems(name, version, binding)


def context_problems(name: str, version: str, binding: Mapping[str, Any]) -> list[str]:
    found = []
    for where, statement in statements(binding):
        for unknown in sorted(set(CTX.findall(statement)) - set(CONTEXT)):
            hint = (
                "statements are not given the caller's raw key; derive ids from ctx.operation_key"
                if unknown == "idempotency_key"
                else f"a call's context is {', '.join(CONTEXT)}"
            )
            found.append(f"{where} of {name} {version} names ctx.{unknown}: {hint}")
    return found


def tenancy_problems(name: str, version: str, binding: Mapping[str, Any], input_schema: Mapping[str, Any]) -> list[str]:
    problems = []
    for where, lookup in lookups(binding):
        if "tenant_id" not in selected(lookup):
            problems.append(
                f"{where} of {name} {version} does not select tenant_id: toolgate could not tell whose each "
                "row is; select tenant_id by name (e.g. SELECT x AS id, tenant_id FROM ...)"
            )
    required = set(input_schema.get("required", []))
    for i, bound in enumerate(binding.get("tenant_binding", [])):
        if bound["argument"] not in required:
            problems.append(
                f"binding.tenant_binding[{i}].argument of {name} {version} names {bound['argument']!r}, which the "
                "input schema does not require: a tenant-bound argument must be required"
            )
        columns = set(selected(bound["lookup"]))
        for attribute in sorted(bound.get("attributes", {})):
            where = f"binding.tenant_binding[{i}].attributes.{attribute} of {name} {version}"
            if attribute == "tenant":
                problems.append(f"{where}: `tenant` is every resource's own tenant; name the column otherwise")
            elif attribute not in columns:
                problems.append(f"{where}: the lookup does not select {attribute}; select it by name")
    return problems


def selected(query: str) -> list[str]:
    """The output column names of a query's outermost SELECT, lowercased unless quoted; an item
    whose name cannot be read (an expression without alias, a `*`) is left out."""
    items = _select_list(query)
    return [n for n in (_output_name(item) for item in items) if n is not None]


def _output_name(item: str) -> str | None:
    item = item.strip()
    for pattern in (ALIASED, COLUMN, IMPLICIT):
        match = pattern.match(item)
        if match:
            name = match.group(1)
            if name.startswith('"'):
                return name[1:-1]
            return None if name.lower() in KEYWORDS else name.lower()
    return None


def _select_list(query: str) -> list[str]:
    """The items between the outermost SELECT and its FROM, split at the commas between them."""
    words = list(_top_level(query))
    start = next((i for i, (word, _) in enumerate(words) if word == "select"), None)
    if start is None:
        return []
    begin = words[start][1] + len("select")
    end = next((pos for word, pos in words[start + 1 :] if word in ("from", "select")), len(query))
    body = query[begin:end]
    body = re.sub(r"(?is)^\s*(DISTINCT(\s+ON\s*\([^)]*\))?|ALL)\s+", "", body)
    return _split_commas(body)


def _top_level(query: str) -> Iterator[tuple[str, int]]:
    """(lowercased keyword, position) of every word outside parentheses, quotes and comments."""
    depth, i, n = 0, 0, len(query)
    while i < n:
        ch = query[i]
        if ch in "'\"":
            close = query.find(ch, i + 1)
            i = n if close < 0 else close + 1
            continue
        if query.startswith("--", i):
            close = query.find("\n", i)
            i = n if close < 0 else close + 1
            continue
        if query.startswith("/*", i):
            close = query.find("*/", i + 2)
            i = n if close < 0 else close + 2
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif depth == 0 and (ch.isalpha() or ch == "_") and (i == 0 or not _word_char(query[i - 1])):
            j = i
            while j < n and _word_char(query[j]):
                j += 1
            yield query[i:j].lower(), i
            i = j
            continue
        i += 1


def _word_char(ch: str) -> bool:
    return ch.isalnum() or ch in "_$"


def _split_commas(body: str) -> list[str]:
    items, depth, start, quote = [], 0, 0, ""
    for i, ch in enumerate(body):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(body[start:i])
            start = i + 1
    items.append(body[start:])
    return [item for item in items if item.strip()]
