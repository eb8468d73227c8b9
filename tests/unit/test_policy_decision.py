"""The policy gates (workers/policy/decision.py)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.unit.factories import ALL_SCOPES, contracts, principal, registry, stage_record
from toolgate.contracts.registry import Contract
from toolgate.taxonomy import Taxonomy
from toolgate.workers.policy.decision import MIN_APPROVALS, Allow, Deny, decide, resource_refs


def owners_for(contract: Contract, record: Any, tenant: str) -> dict[tuple[str, str], str]:
    return {(lookup, value): tenant for lookup, _, value in resource_refs(record, contract)}


def contract(name: str) -> Contract:
    return registry().resolve(name, "latest")


def variant(
    base: Contract,
    *,
    side_effect: str | None = None,
    binding: dict[str, Any] | None = None,
    confirmation_required: bool | None = None,
) -> Contract:
    document = copy.deepcopy(dict(base.document))
    if side_effect is not None:
        document["transactional"]["side_effect_class"] = side_effect
    if confirmation_required is not None:
        document["transactional"]["confirmation_required"] = confirmation_required
    return Contract(document, copy.deepcopy(dict(base.binding)) if binding is None else binding, "test")


@pytest.mark.parametrize(
    ("name", "approvals"),
    [("invoice.fetch", 0), ("invoice.create_draft", 0), ("notify.send_email", 1), ("payment.charge_card", 2)],
)
def test_shipped_contracts_allowed_with_their_approvals(name: str, approvals: int) -> None:
    c = contract(name)
    record = stage_record(c)
    assert decide(record, c, owners_for(c, record, "acme")) == Allow(approvals)


def test_side_effect_classes_of_shipped_contracts() -> None:
    classes = {c.name: c.side_effect_class for c in contracts()}
    assert classes["invoice.fetch"] == "READ_ONLY"
    assert classes["notify.send_email"] == "HIGH_RISK_EXTERNAL"
    assert classes["payment.charge_card"] == "CRITICAL_MUTATION"


@pytest.mark.parametrize("c", contracts(), ids=lambda c: c.name)
def test_missing_scope(c: Contract) -> None:
    scopes = [s for s in ALL_SCOPES if s not in c.required_scopes]
    record = stage_record(c, principal=principal(scopes))
    decision = decide(record, c, owners_for(c, record, "acme"))
    assert isinstance(decision, Deny)
    assert decision.taxonomy is Taxonomy.PERMISSION_DENIED
    assert [(e.field, e.code) for e in decision.errors] == [("principal.scopes", "missing_scope")]
    assert all(s in (decision.errors[0].actual or "") for s in c.required_scopes)


def test_missing_scope_checked_before_resources() -> None:
    c = contract("payment.charge_card")
    record = stage_record(c, principal=principal([]))
    decision = decide(record, c, {})
    assert isinstance(decision, Deny) and decision.errors[0].code == "missing_scope"


BOUND = [c for c in contracts() if c.binding.get("tenant_binding")]


@pytest.mark.parametrize("c", BOUND, ids=lambda c: c.name)
def test_cross_tenant(c: Contract) -> None:
    record = stage_record(c)
    decision = decide(record, c, owners_for(c, record, "globex"))
    assert isinstance(decision, Deny)
    assert decision.taxonomy is Taxonomy.PERMISSION_DENIED
    argument = c.binding["tenant_binding"][0]["argument"]
    assert [(e.field, e.code) for e in decision.errors] == [(argument, "cross_tenant")]
    assert decision.errors[0].actual == record.arguments[argument]


@pytest.mark.parametrize("c", BOUND, ids=lambda c: c.name)
def test_resource_missing(c: Contract) -> None:
    record = stage_record(c)
    decision = decide(record, c, {})
    assert isinstance(decision, Deny)
    assert decision.taxonomy is Taxonomy.STALE_STATE
    argument = c.binding["tenant_binding"][0]["argument"]
    assert [(e.field, e.code) for e in decision.errors] == [(argument, "resource_missing")]


def test_owners_are_keyed_by_lookup_and_id() -> None:
    c = contract("invoice.fetch")
    record = stage_record(c)
    ((lookup, argument, value),) = resource_refs(record, c)
    assert (lookup, argument, value) == (c.binding["tenant_binding"][0]["lookup"], "invoice_id", "inv_acme0001")
    # the same id under another lookup does not count as ownership
    assert isinstance(decide(record, c, {("SELECT something else", value): "acme"}), Deny)
    assert decide(record, c, {(lookup, value): "acme"}) == Allow(0)


def test_non_string_reference_is_not_looked_up() -> None:
    c = contract("invoice.fetch")
    record = stage_record(c, arguments={"invoice_id": None})
    assert resource_refs(record, c) == []


@pytest.mark.parametrize(("side_effect", "floor"), sorted(MIN_APPROVALS.items()))
def test_side_effect_class_sets_a_floor(side_effect: str, floor: int) -> None:
    base = contract("invoice.fetch")
    binding = {k: v for k, v in base.binding.items() if k != "approval"}
    c = variant(base, side_effect=side_effect, binding=binding, confirmation_required=False)
    record = stage_record(c)
    assert decide(record, c, owners_for(c, record, "acme")) == Allow(floor)


def test_contract_may_ask_for_more_approvals_than_the_floor() -> None:
    base = contract("invoice.fetch")
    binding = {
        **copy.deepcopy(dict(base.binding)),
        "approval": {"required_approvals": 3, "distinct_approvers": True, "expiry_seconds": 60},
    }
    c = variant(base, binding=binding)
    record = stage_record(c)
    assert decide(record, c, owners_for(c, record, "acme")) == Allow(3)


def test_high_risk_external_needs_one_even_if_contract_says_zero() -> None:
    base = contract("notify.send_email")
    binding = copy.deepcopy(dict(base.binding))
    binding["approval"]["required_approvals"] = 0
    c = variant(base, binding=binding)
    decision = decide(stage_record(c), c, {})
    assert isinstance(decision, Allow) and decision.required_approvals >= 1


def test_critical_mutation_needs_two_even_if_contract_says_one() -> None:
    base = contract("payment.charge_card")
    binding = copy.deepcopy(dict(base.binding))
    binding["approval"]["required_approvals"] = 1
    c = variant(base, binding=binding)
    record = stage_record(c)
    decision = decide(record, c, owners_for(c, record, "acme"))
    assert isinstance(decision, Allow) and decision.required_approvals >= 2


def test_unknown_side_effect_class_fails_closed() -> None:
    c = variant(contract("invoice.fetch"), side_effect="SOMETHING_NEW")
    record = stage_record(c)
    decision = decide(record, c, owners_for(c, record, "acme"))
    assert isinstance(decision, Deny)
    assert decision.taxonomy is Taxonomy.POLICY_VIOLATION
    assert decision.errors[0].code == "unknown_side_effect_class"
