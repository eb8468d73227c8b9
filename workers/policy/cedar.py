"""Cedar's verdict on a round's calls (issue 51): pure, no I/O, no clock (the time is the case's).

Each call becomes one Cedar request: principal `Agent::"<agent>"` (in its `Tenant`; or
`Agent::"<tenant>/*"` for all the tenant's agents, when no policy tells them apart), action
`Action::"<tool>@<version>"`, resource the call's tenant-bound resource (`Invoice::"<tenant>/<id>"`,
with the attributes its binding offers, from the facts the round read) where some policy that may
apply to the action reads it, else the call's `Tenant`, and a context typed by the
contracts' schema (contracts/cedar_schema.py): the arguments Cedar can type, facts derived from
them, and the call's facts, cut to what the policies that may apply to its action read. A
round's requests go to Cedar in one batch, against one entity set (the set's action hierarchy,
and the round's tenants and agents, with the agent attributes some policy reads; kept for the
rounds that have the same), without the
schema: the set was validated against it when admitted, and each context is typed by
construction (`project` keeps only what the schema types, as it types it). Default deny: a
call no permit applies to is refused.

A verdict is a `Deny` (a forbid applied, no permit did, or a policy could not be evaluated:
fail closed) or a `Permit`, naming the permits that applied and the most approvals any asks for.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import cedarpy

from toolgate.contracts.cedar_policy import CedarPolicy
from toolgate.contracts.cedar_reads import prune, reads
from toolgate.contracts.cedar_schema import ATTRIBUTE_TYPES, DIMENSIONS, action_id, resource_binding, resource_type
from toolgate.contracts.contract import Contract
from toolgate.schemas.models import StageRecord, TaxonomyClass
from toolgate.workers.policy.case import Deny, Permit, Verdict, deny, run_of

MINUTE_MS = 60_000
MAX_HANDLES = 64  # entity sets kept for later rounds
DAY_MS = 86_400_000


@dataclass(frozen=True)
class Ask:
    """What Cedar is asked about one call: the record, its contract, and the usage so far."""

    record: StageRecord
    contract: Contract
    environment: str
    now_ms: int
    per_run: Mapping[str, int]  # budget dimension -> used by the call's run
    per_day: Mapping[str, int]  # budget dimension -> used by the call's tenant today
    resource: Mapping[str, Any] | None = None  # the row of the call's tenant-bound resource, if found


def project(value: Any, ctype: Mapping[str, Any]) -> Any:
    """`value` as the schema types it, or None where it has no Cedar value (null, a fraction)."""
    kind = ctype["type"]
    if kind == "Record":
        if not isinstance(value, Mapping):
            return None
        found = {name: project(value.get(name), sub) for name, sub in ctype["attributes"].items()}
        return {name: v for name, v in found.items() if v is not None}
    if kind == "Set":
        items = [project(v, ctype["element"]) for v in value] if isinstance(value, list) else None
        return None if items is None or any(v is None for v in items) else items
    if kind == "Long":
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if kind == "Boolean":
        return value if isinstance(value, bool) else None
    return value if isinstance(value, str) else None


def _derived(names: Sequence[str], arguments: Mapping[str, Any]) -> dict[str, str]:
    derived = {}
    for name in names:
        value = arguments.get(name)
        if isinstance(value, str) and "@" in value:
            derived[f"{name}_domain"] = value.rsplit("@", 1)[1].lower()
    return derived


def context_of(policy: CedarPolicy, ask: Ask) -> dict[str, Any]:
    """The call's context: every part of it some policy that may apply to its action reads
    (the parts none reads are not built)."""
    contract, call = ask.contract, ask.record.call
    security = contract.document["security"]
    action = action_id(contract)
    paths = policy.reads[action]
    context: dict[str, Any] = {
        "tool": contract.name,
        "version": contract.version,
        "side_effect_class": contract.side_effect_class,
        "data_classification": security["data_classification"],
        "egress_policy": security["egress_policy"],
        "environment": ask.environment,
        "dry_run": bool(call.dry_run),
    }
    if reads(paths, "arguments"):
        context["arguments"] = project(call.arguments, policy.arguments[action]) or {}
    if reads(paths, "derived"):
        context["derived"] = _derived(policy.emails[action], call.arguments)
    if reads(paths, "time"):
        context["time"] = {
            "epoch_ms": ask.now_ms,
            "minute_of_day_utc": (ask.now_ms // MINUTE_MS) % 1440,
            "weekday_utc": (ask.now_ms // DAY_MS + 3) % 7 + 1,  # 1970-01-01 was a Thursday (4)
        }
    if reads(paths, "usage"):
        context["usage"] = {
            "run": {dim: ask.per_run.get(dim, 0) for dim in DIMENSIONS},
            "tenant_today": {dim: ask.per_day.get(dim, 0) for dim in DIMENSIONS},
        }
    return context


def request_of(policy: CedarPolicy, ask: Ask) -> dict[str, Any]:
    """The call as Cedar is asked about it, its context cut to what the policies that may apply to
    its action read."""
    action = action_id(ask.contract)
    context = prune(context_of(policy, ask), policy.reads[action])
    return {
        "principal": {"type": "Agent", "id": principal_of(ask, policy.agents_alike)},
        "action": {"type": "Action", "id": action},
        "resource": resource_of(ask, action in policy.resource_read),
        "context": context,
    }


def resource_of(ask: Ask, read: bool) -> dict[str, str]:
    """The request's resource: the call's tenant-bound resource, when some policy that may apply
    to its action reads it (`read`), else its Tenant (every resource's `tenant`: the same answer)."""
    bound, tenant = resource_binding(ask.contract), ask.record.call.tenant_id
    if not read or bound is None:
        return {"type": "Tenant", "id": tenant}
    value = ask.record.call.arguments.get(bound["argument"])
    return {"type": resource_type(ask.contract), "id": f"{tenant}/{value if isinstance(value, str) else ''}"}


def resource_entity(ask: Ask, home: Mapping[str, str]) -> dict[str, Any]:
    """The call's tenant-bound resource as an entity in its tenant: `tenant`, and each attribute
    its binding offers that the row holds with the declared type (one it lacks is absent, and a
    policy reading it cannot be evaluated: the call is refused)."""
    bound = resource_binding(ask.contract) or {}
    row = ask.resource or {}
    attrs: dict[str, Any] = {"tenant": {"__entity": home}}
    for name, kind in bound.get("attributes", {}).items():
        value = project(row.get(name), ATTRIBUTE_TYPES[kind])
        if value is not None:
            attrs[name] = value
    return {"uid": resource_of(ask, True), "attrs": attrs, "parents": [home]}


def principal_of(ask: Ask, alike: bool) -> str:
    """The id of the call's principal: its agent's, or, when the policies see only an agent's
    tenant (`alike`), one principal standing for every agent of the tenant."""
    tenant, agent, _ = run_of(ask.record)
    return f"{tenant}/*" if alike else agent


def entities_of(
    asks: Sequence[Ask],
    domains: Mapping[str, Sequence[str]],
    attributes: frozenset[str] | None = None,
    alike: bool = False,
    resources: frozenset[str] = frozenset(),
) -> list[dict[str, Any]]:
    """The round's tenants (with their mail domains), agents, the resources of the calls whose
    action is in `resources` (its policies read them) and, when a policy reads an agent's `user`,
    users, each once. An agent carries the `attributes` some policy reads (None: all); `alike`:
    one agent per tenant stands for all of them (`principal_of`), with none."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for ask in asks:
        tenant, agent = run_of(ask.record)[0], principal_of(ask, alike)
        user, scopes = ask.record.call.principal.user_id, ask.record.call.principal.scopes
        home = {"type": "Tenant", "id": tenant}
        tenancy = {"tenant": {"__entity": home}, "domains": list(domains.get(tenant, ()))}
        found.setdefault(("Tenant", tenant), {"uid": home, "attrs": tenancy})
        if action_id(ask.contract) in resources and resource_binding(ask.contract) is not None:
            entity = resource_entity(ask, home)
            found.setdefault((entity["uid"]["type"], entity["uid"]["id"]), entity)
        attrs = {
            "tenant": {"__entity": home},
            "user": {"__entity": {"type": "User", "id": user}},
            "scopes": sorted(scopes),
        }
        if alike:
            attrs = {}
        elif attributes is not None:
            attrs = {name: value for name, value in attrs.items() if name in attributes}
        if "user" in attrs:
            found.setdefault(("User", user), {"uid": {"type": "User", "id": user}, "attrs": {}, "parents": [home]})
        found.setdefault(("Agent", agent), {"uid": {"type": "Agent", "id": agent}, "attrs": attrs, "parents": [home]})
    return [{"parents": [], **entity} for entity in found.values()]


def judge(policy: CedarPolicy, asks: Sequence[Ask], domains: Mapping[str, Sequence[str]]) -> list[Verdict]:
    """Cedar's verdict on each call, in order, from one batch authorization. Calls that make
    the same request (principal, action, resource and context as cut to what the policies
    read: a tool's reads in one minute, say) are asked once, and given the one verdict. A call
    of a tool version the set was not admitted against is refused: no policy was checked
    against it."""
    known = [a for a in asks if action_id(a.contract) in policy.arguments]
    if not known:
        return [_unknown(a) for a in asks]
    requests: dict[str, dict[str, Any]] = {}
    first: dict[str, Ask] = {}  # the first call of each request, which its verdict names
    keys: dict[int, str] = {}
    for ask in known:
        request = request_of(policy, ask)
        request["context"] = json.dumps(request["context"])  # cedarpy takes it as text
        key = "\0".join(
            (request["principal"]["id"], request["action"]["id"], request["resource"]["id"], request["context"])
        )
        if key not in requests:
            requests[key], first[key] = request, ask
        keys[id(ask)] = key
    entities = _entities(policy, known, domains)
    answers = cedarpy.is_authorized_batch(list(requests.values()), policy.policies, entities)
    verdicts = {key: verdict(policy, first[key], answer) for key, answer in zip(requests, answers, strict=True)}
    return [verdicts[keys[id(a)]] if id(a) in keys else _unknown(a) for a in asks]


def _entities(policy: CedarPolicy, asks: Sequence[Ask], domains: Mapping[str, Sequence[str]]) -> cedarpy.Entities:
    """The admitted action hierarchy, plus the round's tenants, agents and users: the set an
    earlier round built when it had the same (the same tenants with the same domains, and
    agents alike or the same agents), else a new one (adding to the hierarchy rebuilds it)."""
    text = json.dumps(
        entities_of(asks, domains, policy.principal_attributes, policy.agents_alike, policy.resource_read)
    )
    handle = policy.handles.get(text)
    if handle is None:
        if len(policy.handles) >= MAX_HANDLES:
            policy.handles.clear()
        handle = policy.handles[text] = policy.actions.with_added_json_str(text)
    return handle


def _unknown(ask: Ask) -> Deny:
    name = f"{ask.contract.name} {ask.contract.version}"
    return deny(
        TaxonomyClass.POLICY_VIOLATION, "policy.unknown_action", f"the policy set was not checked against {name}"
    )


def verdict(policy: CedarPolicy, ask: Ask, result: cedarpy.AuthzResult) -> Verdict:
    applied = set(result.diagnostics.reasons)  # Cedar's order is not stable: the set's order is
    reasons = [rule for policy_id, rule in policy.rules.items() if policy_id in applied]
    if result.diagnostics.errors:  # a policy Cedar could not evaluate might have forbidden it
        return deny(
            TaxonomyClass.POLICY_VIOLATION,
            "policy.evaluation_error",
            "the policy could not be evaluated for this call; refusing",
            finding="cedar_evaluation_error",
        )
    if not result.allowed:
        forbid = next((r for r in reasons if r.effect == "forbid"), None)
        if forbid is None:
            name = f"{ask.contract.name} {ask.contract.version}"
            return deny(TaxonomyClass.POLICY_VIOLATION, "policy.no_permit", f"no policy permits {name} here")
        message = forbid.message or f"policy {forbid.id} forbids this call"
        return deny(TaxonomyClass.POLICY_VIOLATION, f"policy.{forbid.id}", message, rule=forbid.id)
    asking = [r for r in reasons if r.approvals]
    groups = tuple(dict.fromkeys(g for r in asking for g in r.groups))
    return Permit(max((r.approvals for r in asking), default=0), groups, tuple(r.id for r in reasons))
