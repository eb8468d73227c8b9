"""The Cedar schema of the registered contracts (issue 51): what a Cedar policy may name, typed.

Pure: a function of the contracts, no I/O. The shape (docs/cedar-plan.md says why):

* principal `Agent` (in its `Tenant`; attributes `tenant`, `user`, `scopes`), `User` (in its
  `Tenant`), `Tenant` (attribute `domains`, the mail domains that are the tenant's own);
* resource: the resource the call's first tenant-bound argument names (binding `tenant_binding`),
  an entity of a type named after it (`invoice` -> `Invoice`) in its `Tenant`, with the
  attributes the binding offers (`attributes`: columns of its lookup's row); or, for a tool with
  no tenant-bound argument, the call's `Tenant`. Every resource has `tenant` (a Tenant's is
  itself), so `principal in resource.tenant` says "the agent acts inside its own tenant" whatever
  the resource;
* one action per tool version, `Action::"payment.charge_card@1.0.0"`, member of an action
  group per tool (`Action::"payment.charge_card"`) and one per side-effect class
  (`Action::"CRITICAL_MUTATION"`), so a policy can name a tool, a version or a class;
* a typed `context` per action: `arguments` from the tool's input schema, `derived` facts
  computed from the arguments (the domain of an e-mail address), and the call's facts
  (`FACTS`: side-effect class, data classification, egress, environment, time, usage).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from toolgate.contracts.contract import Contract

DIMENSIONS = ("read", "write", "external_action", "financial", "critical_mutation")
CLASSES = (
    "READ_ONLY",
    "EPHEMERAL_WRITE",
    "LOW_RISK_INTERNAL",
    "MEDIUM_RISK_WRITE",
    "HIGH_RISK_EXTERNAL",
    "CRITICAL_MUTATION",
)

STRING: dict[str, Any] = {"type": "String"}
LONG: dict[str, Any] = {"type": "Long"}
BOOL: dict[str, Any] = {"type": "Boolean"}


def record(attributes: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "Record", "attributes": dict(attributes)}


def _counts() -> dict[str, Any]:
    return record({dim: LONG for dim in DIMENSIONS})


# Every call's facts, whatever its tool: the context beside `arguments` and `derived`.
FACTS: dict[str, Any] = {
    "tool": STRING,
    "version": STRING,
    "side_effect_class": STRING,
    "data_classification": STRING,
    "egress_policy": STRING,
    "environment": STRING,
    "dry_run": BOOL,
    # UTC, from the stage's clock: minute of the day (0..1439), weekday (1 Monday .. 7 Sunday).
    "time": record({"epoch_ms": LONG, "minute_of_day_utc": LONG, "weekday_utc": LONG}),
    # The usage counted before this call, per budget dimension.
    "usage": record({"run": _counts(), "tenant_today": _counts()}),
}

TENANT: dict[str, Any] = {"type": "Entity", "name": "Tenant"}
ENTITY_TYPES: dict[str, Any] = {
    "Tenant": {"shape": record({"tenant": TENANT, "domains": {"type": "Set", "element": STRING}})},
    "User": {"memberOfTypes": ["Tenant"], "shape": record({})},
    "Agent": {
        "memberOfTypes": ["Tenant"],
        "shape": record(
            {
                "tenant": TENANT,
                "user": {"type": "Entity", "name": "User"},
                "scopes": {"type": "Set", "element": STRING},
            }
        ),
    },
}


ATTRIBUTE_TYPES = {"string": STRING, "integer": LONG, "boolean": BOOL}


class SchemaConflict(ValueError):
    """Contracts that describe one resource type in ways that cannot both hold."""


def resource_binding(contract: Contract) -> Mapping[str, Any] | None:
    """The binding of the call's resource: its first tenant-bound argument, if it has one."""
    bound = contract.binding.get("tenant_binding", [])
    return bound[0] if bound else None


def resource_type(contract: Contract) -> str:
    """The Cedar entity type of the call's resource: `invoice` -> `Invoice`, `purchase_order` ->
    `PurchaseOrder`; `Tenant` for a tool with no tenant-bound argument."""
    bound = resource_binding(contract)
    if bound is None:
        return "Tenant"
    return "".join(part[:1].upper() + part[1:] for part in str(bound["resource"]).replace("-", "_").split("_"))


def resource_types(contracts: Iterable[Contract]) -> dict[str, Any]:
    """The entity types of the contracts' resources, each in its Tenant, with `tenant` and the
    attributes the bindings offer. An attribute not every binding of the type offers is
    optional (policies test it with `has`); two bindings typing one attribute apart, or a
    resource named like one of the principals' types, are a SchemaConflict."""
    offered: dict[str, list[Mapping[str, str]]] = {}
    for contract in contracts:
        bound = resource_binding(contract)
        if bound is not None:
            offered.setdefault(resource_type(contract), []).append(bound.get("attributes", {}))
    types: dict[str, Any] = {}
    for name, all_offers in offered.items():
        if name in ENTITY_TYPES:
            raise SchemaConflict(f"a tenant-bound resource may not be named {name!r}: toolgate's own type")
        attributes: dict[str, Any] = {"tenant": TENANT}
        for offer in all_offers:
            for attribute, kind in offer.items():
                if attribute in attributes and attributes[attribute]["type"] != ATTRIBUTE_TYPES[kind]["type"]:
                    raise SchemaConflict(f"resource {name}: contracts type attribute {attribute!r} differently")
                attributes[attribute] = dict(ATTRIBUTE_TYPES[kind])
        for attribute, typed in attributes.items():
            if attribute != "tenant" and not all(attribute in offer for offer in all_offers):
                typed["required"] = False
        types[name] = {"memberOfTypes": ["Tenant"], "shape": record(attributes)}
    return types


def action_id(contract: Contract) -> str:
    """A tool version's action: `payment.charge_card@1.0.0`."""
    return f"{contract.name}@{contract.version}"


def cedar_type(schema: Mapping[str, Any]) -> dict[str, Any] | None:
    """The Cedar type of a JSON-schema value, or None when Cedar has none for it (a number
    that may be fractional, a mixed union): such an argument is left out of the context."""
    kinds = _kinds(schema)
    if kinds == {"string"}:
        return dict(STRING)
    if kinds == {"integer"}:
        return dict(LONG)
    if kinds == {"boolean"}:
        return dict(BOOL)
    if kinds == {"array"}:
        element = cedar_type(schema.get("items", {}))
        return None if element is None else {"type": "Set", "element": element}
    if kinds == {"object"}:
        return record(_attributes(schema))
    return None


def _kinds(schema: Mapping[str, Any]) -> set[str]:
    """The JSON types a schema admits, a null alternative aside (an optional argument)."""
    if "anyOf" in schema or "oneOf" in schema:
        branches = [b for b in schema.get("anyOf", schema.get("oneOf", [])) if b.get("type") != "null"]
        return set().union(*(_kinds(b) for b in branches)) if len(branches) == 1 else {"mixed"}
    if "enum" in schema or "const" in schema:
        values = schema.get("enum", [schema.get("const")])
        return {_json_kind(v) for v in values if v is not None}
    kind = schema.get("type")
    kinds = {str(k) for k in kind} if isinstance(kind, list) else {str(kind)}
    return {k for k in kinds if k != "null"} or {"mixed"}


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    return "string" if isinstance(value, str) else "mixed"


def _attributes(schema: Mapping[str, Any]) -> dict[str, Any]:
    required = set(schema.get("required", []))
    attributes = {}
    for name, sub in schema.get("properties", {}).items():
        typed = cedar_type(sub)
        if typed is not None:
            # A nullable or optional argument may be absent: policies test it with `has`.
            if name not in required or _nullable(sub):
                typed["required"] = False
            attributes[name] = typed
    return attributes


def _nullable(schema: Mapping[str, Any]) -> bool:
    kinds = schema.get("type")
    branches = schema.get("anyOf", schema.get("oneOf", []))
    return (isinstance(kinds, list) and "null" in kinds) or any(b.get("type") == "null" for b in branches)


def email_arguments(contract: Contract) -> tuple[str, ...]:
    """The top-level string arguments that hold an e-mail address (format email, or a pattern
    with an @): each gets `derived.<name>_domain`, its domain in lower case."""
    found = []
    for name, sub in contract.input_schema.get("properties", {}).items():
        if _kinds(sub) == {"string"} and (sub.get("format") == "email" or "@" in str(sub.get("pattern", ""))):
            found.append(name)
    return tuple(found)


def context_type(contract: Contract) -> dict[str, Any]:
    derived = {f"{name}_domain": {**STRING, "required": False} for name in email_arguments(contract)}
    return record({"arguments": record(_attributes(contract.input_schema)), "derived": record(derived), **FACTS})


def action_entities(schema: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The schema's actions as Cedar entities, each with its groups: what a request needs to
    know of `action in Action::"CRITICAL_MUTATION"` when it is authorized without the schema."""
    return [
        {
            "uid": {"type": "Action", "id": name},
            "attrs": {},
            "parents": [{"type": "Action", "id": m["id"]} for m in action.get("memberOf", [])],
        }
        for name, action in schema[""]["actions"].items()
    ]


def schema_of(contracts: Iterable[Contract]) -> dict[str, Any]:
    """The Cedar schema (JSON form) of these contracts (SchemaConflict when their resources'
    descriptions disagree)."""
    contracts = list(contracts)
    actions: dict[str, Any] = {name: {} for name in CLASSES}
    for contract in contracts:
        actions.setdefault(contract.name, {})
        actions[action_id(contract)] = {
            "memberOf": [{"id": contract.name}, {"id": contract.side_effect_class}],
            "appliesTo": {
                "principalTypes": ["Agent"],
                "resourceTypes": [resource_type(contract)],
                "context": context_type(contract),
            },
        }
    return {"": {"entityTypes": {**ENTITY_TYPES, **resource_types(contracts)}, "actions": actions}}
