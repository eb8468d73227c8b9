"""Cedar policies on the resource a call names (issue 51, part 1): the tenant-bound resources in
the schema, with the attributes their bindings offer; a policy reading one judged against the row
the round read; `principal in resource.tenant` holding whatever the resource; the idiom that
would never hold on one refused at admission. No I/O."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit import test_fail_closed_contracts as fail_closed
from tests.unit.factories import registry, stage_record
from toolgate.contracts.admission import ContractRefused, admit
from toolgate.contracts.cedar_policy import CedarPolicy, PolicyRefused, admit_policies, policy_files
from toolgate.contracts.cedar_schema import action_id, schema_of
from toolgate.contracts.contract import Contract
from toolgate.workers.policy.case import Deny, Permit, Usage
from toolgate.workers.policy.cedar import entities_of, judge, request_of
from toolgate.workers.policy.decision import refs
from toolgate.workers.policy.round_decisions import ask_of

BASE = '@id("base") permit (principal, action, resource) when { principal in resource.tenant };\n'
# The "no refund larger than the original charge", in the demo's terms: no charge above
# what the invoice it pays is for.
NOT_ABOVE = """
@id("not-above-the-invoice")
@message("a charge may not exceed its invoice")
forbid (principal, action in Action::"payment.charge_card", resource)
when { resource has amount_cents && context.arguments.amount_cents > resource.amount_cents };
"""
INVOICE = {"id": "inv_acme0002", "tenant_id": "acme", "status": "open", "currency": "USD", "amount_cents": 125000}


def contract(name: str) -> Contract:
    return registry().resolve(name, "latest")


def admitted(*texts: str) -> CedarPolicy:
    return admit_policies([(f"p{i}.cedar", t) for i, t in enumerate(texts)], registry())


def charge(cents: int, row: dict[str, Any] | None = INVOICE) -> Any:
    c = contract("payment.charge_card")
    record = stage_record(c, {"invoice_id": "inv_acme0002", "amount_cents": cents, "currency": "USD"})
    facts = {(lookup, value): (row,) for lookup, value in refs(record, c)} if row else {}
    return ask_of(record, c, Usage(), "dev", 0, facts)


def test_the_schema_makes_each_tenant_bound_resource_an_entity_with_the_attributes_offered() -> None:
    schema = schema_of(registry())[""]
    invoice = schema["entityTypes"]["Invoice"]
    assert invoice["memberOfTypes"] == ["Tenant"]
    assert invoice["shape"]["attributes"] == {
        "tenant": {"type": "Entity", "name": "Tenant"},
        "status": {"type": "String"},
        "currency": {"type": "String"},
        "amount_cents": {"type": "Long"},
    }
    assert schema["entityTypes"]["Customer"]["shape"]["attributes"] == {"tenant": {"type": "Entity", "name": "Tenant"}}
    resource_of = {a: s["appliesTo"]["resourceTypes"] for a, s in schema["actions"].items() if "appliesTo" in s}
    assert resource_of[action_id(contract("payment.charge_card"))] == ["Invoice"]
    assert resource_of[action_id(contract("invoice.create_draft"))] == ["Customer"]
    assert resource_of[action_id(contract("invoice.tax_estimate"))] == ["Tenant"]
    assert schema["entityTypes"]["Tenant"]["shape"]["attributes"]["tenant"] == {"type": "Entity", "name": "Tenant"}


def test_a_policy_on_the_resource_judges_the_row_the_round_read() -> None:
    policy = admitted(BASE, NOT_ABOVE)
    assert action_id(contract("payment.charge_card")) in policy.resource_read
    within, above = charge(125000), charge(125001)
    (ok, refused) = judge(policy, [within, above], {})
    assert isinstance(ok, Permit)
    assert isinstance(refused, Deny) and refused.errors[0].code == "policy.not-above-the-invoice"
    assert request_of(policy, within)["resource"] == {"type": "Invoice", "id": "acme/inv_acme0002"}
    (entity,) = [e for e in entities_of([within], {}, resources=policy.resource_read) if e["uid"]["type"] == "Invoice"]
    assert entity["attrs"]["amount_cents"] == 125000 and entity["parents"] == [{"type": "Tenant", "id": "acme"}]


def test_a_resource_the_round_did_not_find_cannot_satisfy_a_policy_that_reads_it() -> None:
    """Fail closed: without the row the forbid cannot be evaluated, and the call is refused (the
    tenant gate refuses it first, with its own answer: workers/policy/decision.py)."""
    policy = admitted(BASE, NOT_ABOVE.replace("resource has amount_cents && ", ""))
    (verdict,) = judge(policy, [charge(100, row=None)], {})
    assert isinstance(verdict, Deny) and verdict.errors[0].code == "policy.evaluation_error"


def test_without_a_policy_on_the_resource_a_request_names_the_tenant_and_the_round_no_resources() -> None:
    shipped = admit_policies(policy_files(), registry())
    assert shipped.resource_read == frozenset()
    a = charge(100)
    assert request_of(shipped, a)["resource"] == {"type": "Tenant", "id": "acme"}
    assert {
        e["uid"]["type"]
        for e in entities_of([a], {}, shipped.principal_attributes, shipped.agents_alike, shipped.resource_read)
    } == {"Tenant", "Agent"}
    assert isinstance(judge(shipped, [a], {})[0], Permit)  # `principal in resource.tenant` holds


def test_principal_in_resource_on_a_resource_that_is_no_tenant_is_refused_naming_the_idiom() -> None:
    old = '@id("old") permit (principal, action, resource) when { principal in resource };'
    with pytest.raises(PolicyRefused) as refused:
        admitted(old)
    said = str(refused.value)
    assert "p0.cedar: policy old: `principal in resource` is never true for" in said
    assert "write `principal in resource.tenant`" in said
    # On tools whose resource is the tenant it still means what it did.
    scoped = old.replace("action,", 'action in Action::"invoice.tax_estimate",')
    assert admitted(BASE, scoped).rules["policy1"].id == "old"


def test_a_resource_attribute_on_a_tool_without_that_resource_is_refused() -> None:
    wrong = (
        '@id("w") forbid (principal, action in Action::"invoice.tax_estimate", resource) '
        "when { resource.amount_cents > 1 };"
    )
    with pytest.raises(PolicyRefused, match=r"policy w: .*amount_cents"):
        admitted(BASE, wrong)


@pytest.mark.parametrize(
    ("attributes", "said"),
    [
        ({"memo": "string"}, "the lookup does not select memo"),
        ({"tenant": "string"}, "`tenant` is every resource's own tenant"),
    ],
)
def test_admission_refuses_an_attribute_the_lookup_cannot_give(attributes: dict[str, str], said: str) -> None:
    document = fail_closed.document("invoice.fetch")
    document["binding"]["tenant_binding"][0]["attributes"] = attributes
    with pytest.raises(ContractRefused, match=said):
        admit(document, "custom.json")
