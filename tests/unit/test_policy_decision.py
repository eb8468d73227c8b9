"""The policy gates, in order (workers/policy/decision.py): scopes, tenant binding, policy
rules, state consistency, approvals, budgets, rate limits. Table-driven, no I/O."""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

import pytest

from tests.unit.factories import ALL_SCOPES, changed, contracts, principal, registry, stage_record, verdict_of
from toolgate.contracts.admission import ContractRefused
from toolgate.contracts.budgets import Budgets, admit, dimensions, load_budgets
from toolgate.contracts.cedar_policy import CedarPolicy, admit_policies, policy_files
from toolgate.contracts.contract import Contract
from toolgate.schemas.models import StageRecord, TaxonomyClass
from toolgate.workers.policy.decision import MIN_APPROVALS, Allow, Deny, Recent, Usage, decide, refs

NOON = int(dt.datetime(2026, 11, 23, 12, 0, tzinfo=dt.UTC).timestamp() * 1000)
NIGHT = int(dt.datetime(2026, 11, 23, 2, 0, tzinfo=dt.UTC).timestamp() * 1000)


def contract(name: str) -> Contract:
    return registry().resolve(name, "latest")


def facts_for(c: Contract, record: StageRecord, tenant: str = "acme", **columns: Any) -> dict[Any, Any]:
    """Every resource the call names exists, belongs to `tenant` and has `columns`."""
    row = {"tenant_id": tenant, "status": "open", "currency": "USD", "amount_cents": 125000, **columns}
    return {(lookup, value): ({"id": value, **row},) for lookup, value in refs(record, c) if isinstance(value, str)}


def run(
    c: Contract,
    record: StageRecord | None = None,
    *,
    policy: Budgets | None = None,
    cedar: CedarPolicy | None = None,
    usage: Usage | None = None,
    facts: dict[Any, Any] | None = None,
    now: int = NOON,
    environment: str = "dev",
) -> Allow | Deny:
    """The call decided with Cedar's verdict (the shipped set unless `cedar`) and the budgets."""
    record = record or stage_record(c)
    known = facts_for(c, record) if facts is None else facts
    verdict = verdict_of(record, c, environment, now, cedar)
    return decide(
        record, c, policy or load_budgets(), known, usage or Usage(), "event-1", now, environment, verdict=verdict
    )


def codes(decision: Allow | Deny) -> tuple[TaxonomyClass, str]:
    assert isinstance(decision, Deny), decision
    return decision.taxonomy_class, decision.errors[0].code


def policy_with(**changes: Any) -> Budgets:
    document = copy.deepcopy(load_budgets().document)
    for key, value in changes.items():
        document[key] = value
    return admit(document, "test")


@pytest.mark.parametrize(
    ("name", "approvals"),
    [
        ("invoice.fetch", 0),
        ("invoice.create_draft", 0),
        ("notify.send_email", 1),
        ("payment.charge_card", 2),
        ("invoice.tax_estimate", 0),
        ("invoice.void_draft", 0),
    ],
)
def test_shipped_contracts_pass_with_their_approvals(name: str, approvals: int) -> None:
    decision = run(contract(name))
    assert isinstance(decision, Allow) and decision.required_approvals == approvals
    assert decision.spends == dimensions(contract(name))


def test_side_effect_classes_spend_their_budget_dimensions() -> None:
    assert dimensions(contract("invoice.fetch")) == ("read",)
    assert dimensions(contract("invoice.create_draft")) == ("write",)
    assert dimensions(contract("notify.send_email")) == ("external_action",)
    assert dimensions(contract("payment.charge_card")) == ("critical_mutation", "financial")


@pytest.mark.parametrize("c", contracts(), ids=lambda c: c.name)
def test_missing_scope_is_permission_denied(c: Contract) -> None:
    record = stage_record(c, principal=principal([s for s in ALL_SCOPES if s not in c.required_scopes]))
    assert codes(run(c, record)) == (TaxonomyClass.PERMISSION_DENIED, "missing_scope")


def test_another_tenants_resource_is_answered_as_a_missing_one_and_audited_as_what_it_is() -> None:
    c = contract("invoice.fetch")
    record = stage_record(c)
    foreign = run(c, record, facts=facts_for(c, record, tenant="globex"))
    missing = run(c, record, facts={})
    assert isinstance(foreign, Deny) and isinstance(missing, Deny)
    # nothing tells them apart
    assert (foreign.taxonomy_class, foreign.errors) == (missing.taxonomy_class, missing.errors)
    assert codes(foreign) == (TaxonomyClass.STALE_STATE, "resource_missing")
    assert (foreign.finding, missing.finding) == ("cross_tenant", "resource_missing")  # but the audit log


def test_an_argument_that_is_no_resource_id_is_refused_not_skipped() -> None:
    c = contract("invoice.fetch")
    record = changed(stage_record(c), arguments={"invoice_id": 42})
    assert codes(run(c, record, facts={})) == (TaxonomyClass.PERMISSION_DENIED, "not_a_resource_id")
    # A null or absent tenant-bound argument names nothing the gate could check: refused too (N15).
    for arguments in ({"invoice_id": None}, {}):
        absent = changed(stage_record(c), arguments=arguments)
        assert codes(run(c, absent, facts={})) == (TaxonomyClass.PERMISSION_DENIED, "not_a_resource_id")


def test_state_checks_find_wrong_state_and_changed_targets() -> None:
    c = contract("payment.charge_card")
    record = stage_record(c)
    paid = facts_for(c, record, status="paid")
    assert codes(run(c, record, facts=paid)) == (TaxonomyClass.STALE_STATE, "wrong_state")
    assert codes(run(c, record, facts=facts_for(c, record, amount_cents=99))) == (TaxonomyClass.STALE_STATE, "changed")


def test_a_retried_operation_is_not_refused_for_the_state_its_own_effect_left() -> None:
    # The charge ran and settled its invoice; the same operation again is answered by its key.
    c = contract("payment.charge_card")
    record = stage_record(c)
    seen = Usage(counted={"event-1"})
    paid = facts_for(c, record, status="paid")
    assert run(c, record, facts=paid, usage=seen) == Allow(2, ())
    assert codes(run(c, record, facts=paid)) == (TaxonomyClass.STALE_STATE, "wrong_state")  # a new operation is
    # ... but a retry is still held to who may act on what.
    assert codes(run(c, record, facts=facts_for(c, record, tenant="globex"), usage=seen))[1] == "resource_missing"


def test_policy_rules_deny_and_require_approvals_by_environment_class_and_time() -> None:
    charge, draft = contract("payment.charge_card"), contract("invoice.create_draft")
    assert isinstance(run(charge, now=NIGHT), Allow)  # outside business hours, but not in prod
    assert codes(run(charge, now=NIGHT, environment="prod")) == (
        TaxonomyClass.POLICY_VIOLATION,
        "policy.prod-money-in-business-hours",
    )
    assert isinstance(run(charge, now=NOON, environment="prod"), Allow)
    assert run(draft, environment="prod") == Allow(1, ("write",))  # prod writes need an approval
    secret = copy.deepcopy(dict(draft.document))
    secret["security"]["data_classification"] = "secret"
    denied = run(Contract(secret, draft.binding, "test"))
    assert codes(denied) == (TaxonomyClass.POLICY_VIOLATION, "policy.no-secret-data")
    assert isinstance(denied, Deny) and denied.rule == "no-secret-data"


def test_a_tenant_rule_applies_to_that_tenant_only() -> None:
    frozen = '@id("freeze-globex") @message("frozen") forbid (principal in Tenant::"globex", action, resource);'
    cedar = admit_policies([*policy_files(), ("frozen.cedar", frozen)], registry())
    fetch = contract("invoice.fetch")
    assert isinstance(run(fetch, cedar=cedar), Allow)
    globex = stage_record(fetch, tenant_id="globex")
    assert codes(run(fetch, globex, cedar=cedar, facts=facts_for(fetch, globex, tenant="globex"))) == (
        TaxonomyClass.POLICY_VIOLATION,
        "policy.freeze-globex",
    )


def test_an_unknown_side_effect_class_fails_closed() -> None:
    fetch = contract("invoice.fetch")
    odd = copy.deepcopy(dict(fetch.document))
    odd["transactional"]["side_effect_class"] = "TELEPORTATION"
    refused = codes(run(Contract(odd, fetch.binding, "test")))
    assert refused == (TaxonomyClass.POLICY_VIOLATION, "unknown_side_effect_class")
    assert set(MIN_APPROVALS) == {
        "READ_ONLY",
        "EPHEMERAL_WRITE",
        "LOW_RISK_INTERNAL",
        "MEDIUM_RISK_WRITE",
        "HIGH_RISK_EXTERNAL",
        "CRITICAL_MUTATION",
    }


def test_the_eleventh_email_of_a_run_exceeds_a_budget_of_ten() -> None:
    email = contract("notify.send_email")
    usage = Usage(per_run={("acme", "agent_1", "run_1", "external_action"): 9})
    assert isinstance(run(email, usage=usage), Allow)
    usage.per_run[("acme", "agent_1", "run_1", "external_action")] = 10
    assert codes(run(email, usage=usage)) == (TaxonomyClass.BUDGET_EXHAUSTED, "budget.external_action")
    other_run = stage_record(email, run_id="run_2")
    assert isinstance(run(email, other_run, usage=usage), Allow)  # budgets are per run


def test_critical_mutations_have_no_budget_unless_granted() -> None:
    charge = contract("payment.charge_card")
    globex = stage_record(charge, tenant_id="globex")
    denied = run(charge, globex, facts=facts_for(charge, globex, tenant="globex"))
    assert codes(denied) == (TaxonomyClass.BUDGET_EXHAUSTED, "budget.critical_mutation")
    assert isinstance(denied, Deny) and "none is granted" in denied.errors[0].message
    assert isinstance(run(charge), Allow)  # acme is granted


def test_a_tenants_daily_budget_spans_runs() -> None:
    draft = contract("invoice.create_draft")
    policy = policy_with(budgets={"per_run": {"write": 100}, "per_tenant_per_day": {"write": 5}})
    assert codes(run(draft, policy=policy, usage=Usage(per_day={("acme", "write"): 5}))) == (
        TaxonomyClass.BUDGET_EXHAUSTED,
        "budget.write",
    )


def test_a_retried_operation_and_a_dry_run_spend_nothing() -> None:
    email = contract("notify.send_email")
    spent = Usage(per_run={("acme", "agent_1", "run_1", "external_action"): 10}, counted={"event-1"})
    assert run(email, usage=spent) == Allow(1, ())  # the same operation again: counted once
    assert run(email).standing == ()  # only a dry run's preview shows where it leaves each budget
    dry = stage_record(email, dry_run=True)
    allowed = run(email, dry, usage=Usage(per_run={("acme", "agent_1", "run_1", "external_action"): 3}))
    assert isinstance(allowed, Allow) and allowed.spends == ()
    assert "external_action per_run: 4 of 10" in allowed.standing


def test_a_dry_run_is_refused_where_the_real_call_would_be() -> None:
    email = contract("notify.send_email")
    dry = stage_record(email, dry_run=True)
    denied = run(email, dry, usage=Usage(per_run={("acme", "agent_1", "run_1", "external_action"): 10}))
    assert codes(denied) == (TaxonomyClass.BUDGET_EXHAUSTED, "budget.external_action")


def test_a_burst_beyond_the_rate_limit_is_told_when_to_retry() -> None:
    tax = contract("invoice.tax_estimate")  # 5 calls per 10 s per tenant
    window = tax.document["runtime"]["rate_limits"]
    assert isinstance(run(tax, usage=Usage(rate={("acme", tax.name): Recent(4, NOON - 9_000)})), Allow)
    denied = run(tax, usage=Usage(rate={("acme", tax.name): Recent(5, NOON - 9_000)}))
    assert codes(denied) == (TaxonomyClass.RATE_LIMITED, "rate_limited")
    assert isinstance(denied, Deny) and denied.retry_after_ms == NOON - 9_000 + window["window_sec"] * 1000 - NOON
    assert isinstance(run(tax, usage=Usage(rate={("globex", tax.name): Recent(5, NOON)})), Allow)  # its own window


def test_a_tenant_granted_another_rate_window_is_held_to_it_and_others_to_the_contract() -> None:
    tax = contract("invoice.tax_estimate")  # 5 calls per 10 s per tenant, by contract
    granted = policy_with(rate_limits={"grants": {"acme": {tax.name: {"window_sec": 10, "max_requests": 50}}}})
    assert granted.rate_limit("acme", tax) == {"window_sec": 10, "max_requests": 50}
    assert granted.rate_limit("globex", tax) == tax.document["runtime"]["rate_limits"]
    busy = Usage(rate={("acme", tax.name): Recent(49, NOON - 1_000)})
    assert isinstance(run(tax, usage=busy, policy=granted), Allow)
    assert codes(run(tax, usage=busy)) == (TaxonomyClass.RATE_LIMITED, "rate_limited")
    full = Usage(rate={("acme", tax.name): Recent(50, NOON - 1_000)})
    assert codes(run(tax, usage=full, policy=granted)) == (TaxonomyClass.RATE_LIMITED, "rate_limited")


def test_usage_records_spends_and_rate_events() -> None:
    c = contract("notify.send_email")
    usage = Usage()
    usage.record(stage_record(c), "event-9", ("external_action",), NOON)
    usage.record(stage_record(c), "event-10", ("external_action",), NOON + 5)
    assert usage.per_run == {("acme", "agent_1", "run_1", "external_action"): 2}
    assert usage.per_day == {("acme", "external_action"): 2}
    assert usage.rate == {("acme", c.name): Recent(2, NOON)} and usage.counted == {"event-9", "event-10"}


@pytest.mark.parametrize(
    "document",
    [
        {},
        {"rules": [], "budgets": {"per_run": {}, "per_tenant_per_day": {}}},
        {"budgets": {"per_run": {"read": -1}, "per_tenant_per_day": {}}},
        {
            "budgets": {"per_run": {}, "per_tenant_per_day": {}},
            "rate_limits": {"grants": {"acme": {"payment.charge_card": {"max_requests": 10}}}},
        },
    ],
    ids=["no-budgets", "json-rules", "negative-budget", "rate-grant-without-window"],
)
def test_budgets_that_fail_admission_are_refused(document: dict[str, Any]) -> None:
    with pytest.raises(ContractRefused):
        admit(document, "test")


def test_json_rules_beside_budgets_are_refused_pointing_at_the_converter() -> None:
    with pytest.raises(ContractRefused, match="toolgate policy convert"):
        admit({"rules": [], "budgets": {"per_run": {}, "per_tenant_per_day": {}}}, "old.json")
