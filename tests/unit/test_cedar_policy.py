"""Cedar policies (issue 51, part 1): the schema generated from the contracts, the admission of
a policy set (whole or refused, every problem named), the shipped rules' and the argument
rules' verdicts, and the Cedar rewrite deciding as 0.2.0's JSON rules did. No I/O."""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
from typing import Any

import pytest

from tests.unit.factories import principal, registry, stage_record
from tests.unit.json_rules import SHIPPED, json_verdict
from toolgate.contracts.budgets import load_budgets
from toolgate.contracts.cedar_policy import (
    CedarPolicy,
    PolicyRefused,
    admit_policies,
    load_cedar,
    policy_files,
)
from toolgate.contracts.cedar_reads import agents_alike, context_reads, principal_reads, prune
from toolgate.contracts.cedar_schema import action_id, cedar_type, context_type, schema_of
from toolgate.contracts.contract import Contract
from toolgate.schemas.models import StageRecord
from toolgate.workers.policy.case import Permit, Verdict
from toolgate.workers.policy.cedar import MAX_HANDLES, Ask, context_of, entities_of, judge, project, request_of
from toolgate.workers.policy.decision import Allow, Deny, Usage, decide, refs

NOON = int(dt.datetime(2026, 11, 23, 12, 0, tzinfo=dt.UTC).timestamp() * 1000)
NIGHT = int(dt.datetime(2026, 11, 23, 2, 0, tzinfo=dt.UTC).timestamp() * 1000)
DOMAINS = {"acme": ["acme.example"]}


def contract(name: str, version: str = "latest") -> Contract:
    return registry().resolve(name, version)


def shipped(only: str | None = None) -> CedarPolicy:
    files = [(s, t) for s, t in policy_files() if only is None or s.endswith(only)]
    return admit_policies(files, registry())


def ask(c: Contract, arguments: dict[str, Any] | None = None, **kw: Any) -> Ask:
    record = kw.pop("record", None) or stage_record(c, arguments)
    return Ask(record, c, kw.get("environment", "dev"), kw.get("now", NOON), {}, {})


def one(policy: CedarPolicy, a: Ask) -> Verdict:
    (verdict,) = judge(policy, [a], DOMAINS)
    return verdict


def charge(cents: int, currency: str = "USD") -> Ask:
    c = contract("payment.charge_card")
    return ask(c, {"invoice_id": "inv_acme0002", "amount_cents": cents, "currency": currency})


def email(to: str) -> Ask:
    return ask(contract("notify.send_email"), {"to": to, "subject": "s", "body": "b", "invoice_id": None})


# --- the schema --------------------------------------------------------------------------


def test_every_tool_version_is_an_action_in_its_tool_and_class_groups() -> None:
    actions = schema_of(registry())[""]["actions"]
    for c in registry():
        member = {m["id"] for m in actions[action_id(c)]["memberOf"]}
        assert member == {c.name, c.side_effect_class}
        assert actions[action_id(c)]["appliesTo"]["principalTypes"] == ["Agent"]
    assert "invoice.fetch@0.9.0" in actions and "invoice.fetch@1.0.0" in actions


def test_the_context_types_a_tools_arguments_and_derives_an_email_domain() -> None:
    charge_args = context_type(contract("payment.charge_card"))["attributes"]["arguments"]["attributes"]
    assert charge_args == {
        "invoice_id": {"type": "String"},
        "amount_cents": {"type": "Long"},
        "currency": {"type": "String"},
    }
    email_context = context_type(contract("notify.send_email"))["attributes"]
    assert email_context["arguments"]["attributes"]["invoice_id"] == {"type": "String", "required": False}
    assert email_context["derived"]["attributes"] == {"to_domain": {"type": "String", "required": False}}
    assert email_context["usage"]["attributes"]["run"]["attributes"]["financial"] == {"type": "Long"}


@pytest.mark.parametrize(
    ("schema", "typed"),
    [
        ({"type": "string", "enum": ["a"]}, {"type": "String"}),
        ({"enum": [1, 2]}, {"type": "Long"}),
        ({"type": ["integer", "null"]}, {"type": "Long"}),
        ({"type": "array", "items": {"type": "string"}}, {"type": "Set", "element": {"type": "String"}}),
        ({"type": "number"}, None),  # Cedar has no fraction: left out of the context
        ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, None),
        (
            {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
            {"type": "Record", "attributes": {"n": {"type": "Long"}}},
        ),
    ],
)
def test_json_schema_types_map_to_cedar_types(schema: dict[str, Any], typed: dict[str, Any] | None) -> None:
    assert cedar_type(schema) == typed


def test_arguments_are_projected_onto_their_cedar_types() -> None:
    typed = {"type": "Record", "attributes": {"n": {"type": "Long"}, "s": {"type": "String", "required": False}}}
    assert project({"n": 3, "s": None, "x": 1.5}, typed) == {"n": 3}
    assert project({"n": True}, typed) == {}  # a bool is no Long


def test_the_context_has_the_calls_facts_and_its_utc_time() -> None:
    every = shipped()
    context = context_of(dataclasses.replace(every, reads=dict.fromkeys(every.reads)), charge(100))
    assert context["side_effect_class"] == "CRITICAL_MUTATION" and context["data_classification"] == "regulated"
    assert context["time"]["minute_of_day_utc"] == 720 and context["time"]["weekday_utc"] == 1  # a Monday
    assert context["usage"]["run"]["financial"] == 0


# --- admission ---------------------------------------------------------------------------


def test_the_shipped_set_is_admitted_with_every_policy_named() -> None:
    policy = load_cedar(registry())
    ids = {r.id for r in policy.rules.values()}
    assert {"baseline", "no-secret-data", "charge-hard-limit", "large-charge-needs-directors"} <= ids
    assert len(policy.digest) == 64 and policy.digest == load_cedar(registry()).digest


BASE = '@id("base") permit (principal, action, resource);\n'


@pytest.mark.parametrize(
    ("text", "named"),
    [
        (
            '@id("wrong-argument") forbid (principal, action in Action::"notify.send_email", resource)\n'
            "when { context.arguments.amount_cents > 3 };",
            "bad.cedar: policy wrong-argument: ",
        ),
        ('@id("bad-type") forbid (principal, action, resource) when { context.environment > 3 };', "policy bad-type"),
        ('@id("no-such-action") forbid (principal, action == Action::"nope@1.0.0", resource);', "no-such-action"),
        ("permit (principal, action, resource);", "has no @id"),
        ('@id("base") forbid (principal, action, resource);', "another policy of the set has this @id"),
        ('@id("many") @approvals("11") permit (principal, action, resource);', "not a whole number from 1 to 10"),
        ('@id("f") @approvals("1") forbid (principal, action, resource);', "only on a permit"),
        ('@id("g") @groups("x") forbid (principal, action, resource);', "@groups is meaningful only on a permit"),
        ('@id("m") @message("no") permit (principal, action, resource);', "@message is meaningful only on a forbid"),
        ('@id("broken") permit (principal, action resource);', "bad.cedar: does not parse as Cedar"),
    ],
)
def test_an_invalid_set_is_refused_whole_naming_the_policy_and_the_problem(text: str, named: str) -> None:
    with pytest.raises(PolicyRefused, match="refused") as refused:
        admit_policies([("base.cedar", BASE), ("bad.cedar", text)], registry())
    assert named in str(refused.value)


def test_every_problem_of_a_set_is_named_at_once() -> None:
    text = 'permit (principal, action, resource);\n@id("x") @approvals("0") permit (principal, action, resource);'
    wrong = (
        '@id("w") forbid (principal, action in Action::"notify.send_email", resource) when { context.arguments.n > 1 };'
    )
    with pytest.raises(PolicyRefused) as refused:
        admit_policies([("two.cedar", text), ("wrong.cedar", wrong)], registry())
    said = str(refused.value)
    assert "has no @id" in said and "@approvals('0')" in said
    assert "wrong.cedar: policy w: " in said and "arguments.n" in said  # the schema's problems too


def test_an_empty_set_is_refused() -> None:
    with pytest.raises(PolicyRefused, match="no policy"):
        admit_policies([("empty.cedar", "// nothing\n")], registry())


# --- verdicts ----------------------------------------------------------------------------


def codes(verdict: Verdict | Allow) -> str:
    assert isinstance(verdict, Deny), verdict
    return verdict.errors[0].code


def test_default_deny_a_call_no_permit_applies_to_is_refused() -> None:
    only_forbids = admit_policies(
        [("f.cedar", '@id("f") forbid (principal, action, resource) when { context.environment == "x" };')],
        registry(),
    )
    assert codes(one(only_forbids, charge(100))) == "policy.no_permit"


def test_a_usd_charge_over_5000_needs_two_directors_and_over_10000_is_refused() -> None:
    policy = shipped()
    assert one(policy, charge(500_000)) == Permit(0, (), ("baseline",))  # exactly 5,000 USD
    assert one(policy, charge(500_001)) == Permit(
        2, ("finance-directors",), ("large-charge-needs-directors", "baseline")
    )
    assert one(policy, charge(1_500_000, "EUR")) == Permit(0, (), ("baseline",))  # the rule is on USD
    refused = one(policy, charge(1_000_001))
    assert codes(refused) == "policy.charge-hard-limit"
    assert (
        isinstance(refused, Deny) and refused.rule == "charge-hard-limit" and "10,000 USD" in refused.errors[0].message
    )


def test_an_email_outside_the_tenants_domains_needs_an_approval() -> None:
    policy = shipped()
    assert one(policy, email("ann@ACME.example")) == Permit(0, (), ("baseline",))
    outside = one(policy, email("ann@elsewhere.example"))
    assert outside == Permit(1, (), ("email-outside-tenant-needs-approval", "baseline"))


def test_a_batch_judges_each_call_as_alone() -> None:
    policy = shipped()
    asks = [charge(100), charge(1_000_001), email("a@elsewhere.example"), charge(600_000)]
    assert judge(policy, asks, DOMAINS) == [one(policy, a) for a in asks]
    assert judge(policy, [], DOMAINS) == []
    same = [charge(600_000), charge(600_000), charge(300), charge(600_000)]
    assert judge(policy, same, DOMAINS) == [one(policy, a) for a in same]


def test_a_tool_version_the_set_was_not_checked_against_is_refused() -> None:
    fetch_only = admit_policies([("b.cedar", BASE)], [contract("invoice.fetch")])
    assert isinstance(one(fetch_only, ask(contract("invoice.fetch"))), Permit)
    assert codes(one(fetch_only, charge(100))) == "policy.unknown_action"
    verdicts = judge(fetch_only, [charge(100), ask(contract("invoice.fetch"))], DOMAINS)
    assert [type(v) for v in verdicts] == [Deny, Permit]


def test_the_shipped_rules_refuse_critical_mutations_at_night_in_prod_only() -> None:
    policy = shipped()
    assert codes(one(policy, ask(contract("payment.charge_card"), now=NIGHT, environment="prod"))) == (
        "policy.prod-money-in-business-hours"
    )
    assert isinstance(one(policy, ask(contract("payment.charge_card"), now=NIGHT)), Permit)
    assert one(policy, ask(contract("invoice.create_draft"), environment="prod")).approvals == 1  # type: ignore[union-attr]


def test_the_decision_takes_cedars_verdict_for_approvals_and_groups() -> None:
    policy = shipped()
    a = charge(750_000)  # over 5,000 USD
    c, record = a.contract, a.record
    (verdict,) = judge(policy, [a], DOMAINS)
    known = {key: ({**row, "amount_cents": 750_000},) for key, (row,) in facts(c, record).items()}
    allowed = decide(record, c, load_budgets(), known, Usage(), "e", NOON, "dev", verdict=verdict)
    assert allowed == Allow(2, ("critical_mutation", "financial"), approver_groups=("finance-directors",))
    refused = decide(record, c, load_budgets(), known, Usage(), "e", NOON, "dev", verdict=one(policy, charge(10**7)))
    assert codes(refused) == "policy.charge-hard-limit"


def test_a_request_carries_the_context_its_actions_policies_read_and_no_more() -> None:
    reads = shipped().reads
    every = {"data_classification": None, "egress_policy": None}  # the rules of every action
    assert reads["invoice.fetch@1.0.0"] == every
    assert reads["invoice.create_draft@1.0.1"] == {**every, "environment": None}  # prod-writes-need-approval
    assert reads["notify.send_email@1.0.0"] == {**every, "derived": {"to_domain": None}}
    assert reads["payment.charge_card@1.0.0"] == {
        **every,
        "environment": None,
        "arguments": {"currency": None, "amount_cents": None},
        "time": {"minute_of_day_utc": None},
    }
    assert request_of(shipped(), email("a@b.example"))["context"] == {
        "data_classification": "confidential",
        "egress_policy": "allowlisted_domains",
        "derived": {"to_domain": "b.example"},
    }
    text = BASE + (
        '@id("third-charge") @message("two charges a run at most")\n'
        'forbid (principal, action in Action::"payment.charge_card", resource)\n'
        "when { context.usage.run.financial >= 2 };"
    )
    counting = admit_policies([("u.cedar", text)], registry())
    assert counting.reads["payment.charge_card@1.0.0"] == {"usage": {"run": {"financial": None}}}
    assert counting.reads["invoice.fetch@1.0.0"] == {}
    used = Ask(charge(100).record, contract("payment.charge_card"), "dev", NOON, {"financial": 2}, {})
    assert codes(one(counting, used)) == "policy.third-charge"
    assert isinstance(one(counting, charge(100)), Permit)
    assert context_reads({"==": {"left": {"Var": "context"}, "right": {"Record": {}}}}) is None
    assert request_of(counting, used)["context"] == {"usage": {"run": {"financial": 2}}}


def test_a_round_carries_the_agent_attributes_the_policies_read() -> None:
    assert shipped().principal_attributes == frozenset()  # `principal in resource.tenant` reads none
    assert [e["uid"]["type"] for e in entities_of([charge(100)], DOMAINS, frozenset())] == ["Tenant", "Agent"]
    text = BASE + (
        '@id("scoped") @message("no charge without the scope")\n'
        'forbid (principal, action in Action::"payment.charge_card", resource)\n'
        'when { !principal.scopes.contains("payments:charge") };'
    )
    scoped = admit_policies([("s.cedar", text)], registry())
    assert scoped.principal_attributes == {"scopes"}
    assert isinstance(one(scoped, charge(100)), Permit)
    c = contract("payment.charge_card")
    unscoped = stage_record(c, principal=principal(["invoices:read"]))
    assert codes(one(scoped, ask(c, record=unscoped))) == "policy.scoped"
    user_of = BASE + '@id("u") forbid (principal, action, resource) when { principal.user == User::"mallory" };'
    assert admit_policies([("u.cedar", user_of)], registry()).principal_attributes == {"user"}
    some_entity = {"if-then-else": {"if": {"Value": True}, "then": {"Var": "principal"}, "else": {"Var": "principal"}}}
    assert principal_reads([{"conditions": [{"body": {".": {"left": some_entity, "attr": "scopes"}}}]}]) is None
    assert {e["uid"]["type"] for e in entities_of([charge(100)], DOMAINS, frozenset({"user"}))} == {
        "Tenant",
        "User",
        "Agent",
    }


def test_the_parts_of_the_context_no_policy_reads_are_not_built() -> None:
    context = context_of(shipped(), charge(100))  # charges' policies read neither usage nor derived facts
    assert "usage" not in context and "derived" not in context
    assert context["arguments"] == {"invoice_id": "inv_acme0002", "amount_cents": 100, "currency": "USD"}
    assert "arguments" not in context_of(shipped(), email("a@b.example")) and "time" not in context_of(
        shipped(), email("a@b.example")
    )


def body(condition: Any, scope: Any = None) -> dict[str, Any]:
    return {"principal": scope or {"op": "All"}, "conditions": [{"kind": "when", "body": condition}]}


PRINCIPAL = {"Var": "principal"}


def test_policies_that_see_only_an_agents_tenant_take_its_agents_alike() -> None:
    assert shipped().agents_alike  # the shipped set reads `principal in resource.tenant` only
    tenant = {"Value": {"__entity": {"type": "Tenant", "id": "acme"}}}
    agent = {"Value": {"__entity": {"type": "Agent", "id": "agent_1"}}}
    alike = [
        body({"in": {"left": PRINCIPAL, "right": {"Var": "resource"}}}),
        body({"in": {"left": PRINCIPAL, "right": tenant}}),
        body({"is": {"left": PRINCIPAL, "entity_type": "Agent"}}),
        body({"Value": True}, {"op": "in", "entity": {"type": "Tenant", "id": "acme"}}),
    ]
    assert all(agents_alike([p]) for p in alike)
    told_apart = [
        body({"==": {"left": PRINCIPAL, "right": agent}}),
        body({"in": {"left": PRINCIPAL, "right": agent}}),
        body({".": {"left": PRINCIPAL, "attr": "scopes"}}),
        body({"has": {"left": PRINCIPAL, "attr": "user"}}),
        body({"in": {"left": {"Var": "resource"}, "right": PRINCIPAL}}),
        body({"Value": True}, {"op": "==", "entity": {"type": "Agent", "id": "agent_1"}}),
        body({"Value": True}, {"op": "in", "entity": {"type": "User", "id": "u"}}),
    ]
    assert not any(agents_alike([*alike, p]) for p in told_apart)
    named = BASE + '@id("no-mallory") forbid (principal == Agent::"mallory", action, resource);'
    assert not admit_policies([("n.cedar", named)], registry()).agents_alike


def agent_of(a: Ask, agent: str, tenant: str = "acme") -> Ask:
    who = a.record.call.principal.model_copy(update={"agent_id": agent})
    call = a.record.call.model_copy(update={"principal": who, "tenant_id": tenant})
    return dataclasses.replace(a, record=a.record.model_copy(update={"call": call}))


def test_agents_taken_alike_decide_as_each_agent_does() -> None:
    acme_only = BASE.replace("permit (principal,", 'permit (principal in Tenant::"acme",') + (
        '@id("globex-no-charges") @message("no charges for globex")\n'
        'forbid (principal in Tenant::"globex", action in Action::"payment.charge_card", resource);'
    )
    policy = admit_policies([("t.cedar", acme_only)], registry())
    assert policy.agents_alike
    apart = dataclasses.replace(policy, agents_alike=False, handles={})
    round_ = [agent_of(charge(100 * i), f"agent_{i}", "globex" if i % 3 == 0 else "acme") for i in range(1, 10)]
    round_.append(agent_of(email("a@acme.example"), "agent_x"))
    alike, each = judge(policy, round_, DOMAINS), judge(apart, round_, DOMAINS)
    assert alike == each
    assert [codes(v) for v in alike if isinstance(v, Deny)] == ["policy.globex-no-charges"] * 3
    entities = entities_of(round_, DOMAINS, policy.principal_attributes, alike=True)
    assert sorted(e["uid"]["id"] for e in entities if e["uid"]["type"] == "Agent") == ["acme/*", "globex/*"]


def test_a_round_like_an_earlier_one_takes_its_entity_set() -> None:
    policy = dataclasses.replace(shipped(), handles={})
    first = [agent_of(charge(100), "agent_1"), agent_of(charge(200), "agent_2")]
    assert judge(policy, first, DOMAINS) == judge(policy, [agent_of(charge(300), "agent_3")], DOMAINS)[:1] * 2
    assert len(policy.handles) == 1  # acme's agents, alike: one set for both rounds
    judge(policy, [agent_of(charge(100), "agent_9", "globex")], DOMAINS)
    judge(policy, first, {"acme": ["other.example"]})  # the tenant's domains changed: a set of its own
    assert len(policy.handles) == 3
    for i in range(MAX_HANDLES):
        judge(policy, [agent_of(charge(100), "a", f"tenant_{i}")], DOMAINS)
    assert len(policy.handles) <= MAX_HANDLES


def test_a_path_read_whole_keeps_all_of_it() -> None:
    time_whole = {".": {"left": {"Var": "context"}, "attr": "time"}}
    minute = {".": {"left": time_whole, "attr": "minute_of_day_utc"}}
    assert context_reads([minute, time_whole]) == {"time": None} == context_reads([time_whole, minute])
    assert prune({"time": {"a": 1}, "other": 2}, {"time": None}) == {"time": {"a": 1}}


# --- the Cedar rewrite decides as the JSON rules did ---------------------------------------


def facts(c: Contract, record: StageRecord) -> dict[Any, Any]:
    row = {"tenant_id": "acme", "status": "open", "currency": "USD", "amount_cents": 125000}
    return {(lookup, v): ({"id": v, **row},) for lookup, v in refs(record, c) if isinstance(v, str)}


def reclassified(c: Contract, **security: str) -> Contract:
    document = copy.deepcopy(dict(c.document))
    document["security"] = {**document["security"], **security}
    return Contract(document, c.binding, c.source)


def variants() -> list[Contract]:
    found = list(registry())
    found += [reclassified(c, data_classification="secret") for c in registry()]
    found += [reclassified(c, egress_policy="unrestricted_with_approval") for c in registry()]
    return found


def outcome(decision: Allow | Deny) -> tuple[str, int]:
    if isinstance(decision, Deny):
        return decision.errors[0].code, -1
    return "allow", decision.required_approvals


def test_the_cedar_rules_decide_every_case_as_the_json_rules_do() -> None:
    """Every shipped contract, and each made secret or of open egress (the schema is the same:
    those are context values), in dev and prod, at noon and at night."""
    rules, budgets = shipped("rules.cedar"), load_budgets()
    compared = set()
    for c in variants():
        for environment in ("dev", "prod"):
            for now in (NOON, NIGHT):
                record = stage_record(c)
                verdict = one(rules, Ask(record, c, environment, now, {}, {}))
                known = facts(c, record)
                old = json_verdict(SHIPPED["rules"], record, c, environment, now)
                expected = decide(record, c, budgets, known, Usage(), "e", now, environment, verdict=old)
                got = decide(record, c, budgets, known, Usage(), "e", now, environment, verdict=verdict)
                assert outcome(got) == outcome(expected), (c.name, c.document["security"], environment, now)
                compared.add(outcome(expected))
    # The grid reaches every JSON rule: each deny, and each approval count.
    assert {"policy.no-secret-data", "policy.prod-money-in-business-hours"} <= {code for code, _ in compared}
    assert {("allow", 0), ("allow", 1), ("allow", 2)} <= compared
