"""A Cedar policy set (issue 51), admitted whole against the contracts' schema or refused.

`contracts/cedar/*.cedar` ship with toolgate. A set is read from a directory's `*.cedar`
files, in name order, and admitted only when every file parses, every policy names itself
(`@id`, unique across the set), its annotations mean something (`@approvals("N")`, N from 1
to 10, and `@groups("a,b")` only on a permit; `@message` only on a forbid), and the whole set
validates against the schema of the registered contracts (contracts/cedar_schema.py). Any
problem refuses the set with every problem named by file and policy: never half-applied.

What a permit's annotations mean: `@approvals("2") @groups("finance-directors")` on a permit
that applies asks for two human approvals from that group. Cedar's answer names every permit
that applied, so the call needs the most approvals any of them asks for (and the approver
groups those name). A forbid's `@message` is what the refused agent is told.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import cedarpy

from toolgate.contracts.admission import ContractRefused
from toolgate.contracts.cedar_reads import (
    Paths,
    agents_alike,
    applying,
    principal_in_resource,
    principal_reads,
    reads_by_action,
    resource_read,
)
from toolgate.contracts.cedar_schema import (
    SchemaConflict,
    action_entities,
    action_id,
    context_type,
    email_arguments,
    schema_of,
)
from toolgate.contracts.contract import Contract

MAX_APPROVALS = 10


class PolicyRefused(ContractRefused):
    """A Cedar policy set that cannot be admitted; the message names every problem."""


@dataclass(frozen=True)
class Rule:
    """One policy of the set, as its annotations describe it."""

    id: str
    effect: str  # "permit" or "forbid"
    source: str  # the file it came from
    approvals: int = 0
    groups: tuple[str, ...] = ()
    message: str = ""


@dataclass(frozen=True)
class CedarPolicy:
    """An admitted set, bound to the contracts it was validated against: the parsed policies
    (parsed once, reused for every call), its rules by Cedar's policy id, the digest of its
    text (what a decision will name), and, per action, what a request is made of: the Cedar
    type of the arguments and the e-mail arguments whose domain is derived. `actions` is the
    action hierarchy as entities: requests are authorized without the schema (typing each
    request's context against it tripled Cedar's cost per call, docs/cedar-plan.md), their
    contexts typed by construction (workers/policy/cedar.py projects every argument)."""

    policies: cedarpy.PolicySet
    rules: Mapping[str, Rule]
    digest: str
    arguments: Mapping[str, Mapping[str, Any]]
    emails: Mapping[str, tuple[str, ...]]
    actions: cedarpy.Entities
    reads: Mapping[str, Paths | None]  # per action, what of the context its policies read (cedar_reads.py)
    principal_attributes: frozenset[str] | None  # the Agent's attributes some policy reads; None: all
    resource_read: frozenset[str]  # the actions some of whose policies read their resource (cedar_reads.resource_read)
    agents_alike: bool  # the policies see only an agent's tenant (cedar_reads.agents_alike)
    # Entity sets already built (the action hierarchy plus a round's tenants and agents), by
    # their text: a round like an earlier one takes its set instead of building it again.
    handles: dict[str, cedarpy.Entities] = field(default_factory=dict, compare=False, repr=False)


def _rule(policy_id: str, body: Mapping[str, Any], source: str, problems: list[str]) -> Rule:
    notes: Mapping[str, str] = body.get("annotations") or {}
    effect = str(body.get("effect"))
    name = notes.get("id") or ""
    where = f"{source}: policy {name or policy_id}"
    if not name:
        problems.append(f'{where}: has no @id("...") naming it')
    approvals = 0
    if "approvals" in notes:
        text = notes["approvals"]
        if effect != "permit":
            problems.append(f"{where}: @approvals is meaningful only on a permit")
        elif not text.isdigit() or not 1 <= int(text) <= MAX_APPROVALS:
            problems.append(f"{where}: @approvals({text!r}) is not a whole number from 1 to {MAX_APPROVALS}")
        else:
            approvals = int(text)
    groups = tuple(g.strip() for g in notes.get("groups", "").split(",") if g.strip())
    if groups and effect != "permit":
        problems.append(f"{where}: @groups is meaningful only on a permit")
    if "message" in notes and effect != "forbid":
        problems.append(f"{where}: @message is meaningful only on a forbid")
    return Rule(name or policy_id, effect, source, approvals, groups, notes.get("message", ""))


def _parsed(source: str, text: str, problems: list[str]) -> list[tuple[str, Mapping[str, Any]]] | None:
    """The policies of one file (Cedar's JSON form), or None when it does not parse."""
    try:
        document = json.loads(cedarpy.policies_to_json_str(text))
    except ValueError as exc:
        problems.append(f"{source}: does not parse as Cedar: {exc}")
        return None
    if document.get("templates"):
        problems.append(f"{source}: policy templates are not supported")
    return list(document.get("staticPolicies", {}).items())


def admit_policies(files: Iterable[tuple[str, str]], contracts: Iterable[Contract]) -> CedarPolicy:
    """Admit the policy set made of `files` ((source, text), in order) against the schema of
    `contracts`, or raise PolicyRefused naming every problem."""
    files, contracts = list(files), list(contracts)
    problems: list[str] = []
    rules: dict[str, Rule] = {}
    bodies: list[Mapping[str, Any]] = []
    offset = 0
    unparsed = False  # then the set's text cannot be validated, nor its policies numbered as Cedar does
    for source, text in files:
        parsed = _parsed(source, text, problems)
        if parsed is None:
            unparsed, parsed = True, []
        bodies += [body for _, body in parsed]
        for index, (_, body) in enumerate(parsed):
            # Cedar numbers the policies of the joined text policy0, policy1, ... in order.
            rule = _rule(f"policy{offset + index}", body, source, problems)
            if any(r.id == rule.id for r in rules.values()):
                problems.append(f"{source}: policy {rule.id}: another policy of the set has this @id")
            rules[f"policy{offset + index}"] = rule
        offset += len(parsed)
    if not rules and not problems:
        problems.append("the set has no policy: every call would be refused")
    text = "\n".join(t for _, t in files)
    try:
        schema = schema_of(contracts)
    except SchemaConflict as exc:
        raise PolicyRefused(f"Cedar policy set refused: the contracts' schema: {exc}") from exc
    schema_text = json.dumps(schema, sort_keys=True)
    found = applying(bodies, schema[""]["actions"])
    if not unparsed:
        problems += _tenant_tests(found, schema[""]["actions"], list(rules.values()), bodies)
    if rules and not unparsed:  # every problem named at once: the schema's too
        result = cedarpy.validate_policies(text, schema_text)
        for error in result.errors:
            named = rules.get(error.policy_id)
            where = f"{named.source}: policy {named.id}" if named else f"policy {error.policy_id}"
            problems.append(f"{where}: {error.error}")
    if problems:
        raise PolicyRefused("Cedar policy set refused: " + "; ".join(problems))
    digest = hashlib.sha256("\0".join(f"{Path(s).name}\0{t}" for s, t in files).encode()).hexdigest()  # not where
    return CedarPolicy(
        cedarpy.PolicySet.from_str(text),
        rules,
        digest,
        {action_id(c): context_type(c)["attributes"]["arguments"] for c in contracts},
        {action_id(c): email_arguments(c) for c in contracts},
        cedarpy.Entities.from_json_str(json.dumps(action_entities(schema))),
        reads_by_action(bodies, schema[""]["actions"]),
        principal_reads(bodies),
        frozenset(action for action, policies in found.items() if any(map(resource_read, policies))),
        agents_alike(bodies),
    )


def _tenant_tests(
    found: Mapping[str, list[Mapping[str, Any]]], actions: Mapping[str, Any], rules: list[Rule], bodies: list[Any]
) -> list[str]:
    """`principal in resource` in a policy that may apply to an action whose resource is not a
    Tenant: never true there, so a permit would silently never apply. Refused, naming the idiom
    that holds for every resource."""
    problems = []
    for rule, body in zip(rules, bodies, strict=True):
        if not principal_in_resource(body.get("conditions", [])):
            continue
        other = sorted(
            name
            for name, policies in found.items()
            if any(p is body for p in policies) and actions[name]["appliesTo"]["resourceTypes"] != ["Tenant"]
        )
        if other:
            kind = actions[other[0]]["appliesTo"]["resourceTypes"][0]
            problems.append(
                f"{rule.source}: policy {rule.id}: `principal in resource` is never true for {other[0]}, whose "
                f"resource is a {kind}: write `principal in resource.tenant`"
            )
    return problems


def policy_files(directory: Path | None = None) -> list[tuple[str, str]]:
    """The `*.cedar` files of `directory` (the shipped `contracts/cedar/` by default), in name order."""
    if directory is None:
        shipped = resources.files("toolgate.contracts").joinpath("cedar")
        paths = sorted((p for p in shipped.iterdir() if p.name.endswith(".cedar")), key=lambda p: p.name)
        return [(f"contracts/cedar/{p.name}", p.read_text()) for p in paths]
    return [(str(p), p.read_text()) for p in sorted(directory.glob("*.cedar"))]


def load_cedar(contracts: Iterable[Contract], directory: Path | None = None) -> CedarPolicy:
    return admit_policies(policy_files(directory), contracts)
