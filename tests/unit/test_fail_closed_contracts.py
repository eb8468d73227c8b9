"""A contract author's omission fails closed (N15): admission refuses a lookup that does not
select tenant_id and a tenant-bound argument the input schema does not require, naming the
contract and the field; and the gates refuse anyway, should such a contract be loaded around
admission (a row without tenant_id is nobody's; an absent bound argument names nothing)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.unit.factories import contracts, registry, stage_record, verdict_of
from toolgate.contracts.admission import ContractRefused, admit
from toolgate.contracts.binding_rules import selected, tenancy_problems
from toolgate.contracts.budgets import load_budgets
from toolgate.contracts.contract import Contract
from toolgate.schemas.models import TaxonomyClass
from toolgate.workers.policy.decision import Allow, Deny, Usage, decide, refs
from toolgate.workers.runtime import target_state
from toolgate.workers.runtime.facts import owned

NO_TENANT = "SELECT invoice_id AS id, status, currency, amount_cents FROM demo.invoices WHERE invoice_id = ANY(%(ids)s)"


def document(name: str) -> dict[str, Any]:
    c = registry().resolve(name, "latest")
    return copy.deepcopy({"contract": dict(c.document), "binding": dict(c.binding)})


@pytest.mark.parametrize(
    ("query", "names"),
    [
        ("SELECT invoice_id AS id, tenant_id FROM demo.invoices WHERE invoice_id = ANY(%(ids)s)", ["id", "tenant_id"]),
        ("select i.invoice_id id, i.tenant_id, status from demo.invoices i", ["id", "tenant_id", "status"]),
        ('SELECT x AS id, owner AS "tenant_id" FROM t', ["id", "tenant_id"]),
        ("SELECT DISTINCT c.id, upper(t) AS tenant, count(*) FROM t", ["id", "tenant"]),
        ("WITH a AS (SELECT tenant_id FROM b) SELECT a.x AS id FROM a", ["id"]),
        ("SELECT x AS id, (SELECT tenant_id FROM y LIMIT 1) FROM a", ["id"]),
        ("SELECT x AS id, status FROM t -- tenant_id", ["id", "status"]),
        ("SELECT * FROM demo.invoices", []),
        ("SELECT t.* FROM demo.invoices t", []),
        ("SELECT x AS id, 'tenant_id' FROM t", ["id"]),
    ],
)
def test_a_lookups_output_columns_are_read_from_its_select_list(query: str, names: list[str]) -> None:
    assert selected(query) == names


def test_every_shipped_contract_is_fail_closed() -> None:
    for c in contracts():
        assert tenancy_problems(c.name, c.version, c.binding, c.input_schema) == [], c.source


def _set(doc: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    here = doc["binding"]
    for part in path[:-1]:
        here = here[part]
    here[path[-1]] = value


@pytest.mark.parametrize(
    ("name", "path", "field"),
    [
        ("invoice.fetch", ("tenant_binding", 0, "lookup"), "binding.tenant_binding[0].lookup"),
        ("payment.charge_card", ("state_checks", 0, "fact", "lookup"), "binding.state_checks[0].fact.lookup"),
        ("payment.charge_card", ("semantic_rules", 0, "fact", "lookup"), "binding.semantic_rules[0].fact.lookup"),
        (
            "payment.charge_card",
            ("confirmation", "before_state", "lookup"),
            "binding.confirmation.before_state.lookup",
        ),
    ],
)
def test_admission_refuses_a_lookup_that_does_not_select_tenant_id(
    name: str, path: tuple[Any, ...], field: str
) -> None:
    doc = document(name)
    _set(doc, path, NO_TENANT)
    with pytest.raises(ContractRefused) as refused:
        admit(doc, "custom.json")
    message = str(refused.value)
    assert message.startswith("custom.json: ")
    assert f"{field} of {name} " in message and "does not select tenant_id" in message


def test_admission_refuses_a_star_lookup() -> None:
    doc = document("invoice.void_draft")
    _set(doc, ("tenant_binding", 0, "lookup"), "SELECT * FROM demo.invoices WHERE invoice_id = ANY(%(ids)s)")
    with pytest.raises(ContractRefused, match=r"tenant_binding\[0\]\.lookup of invoice\.void_draft"):
        admit(doc, "custom.json")


def test_admission_refuses_a_tenant_bound_argument_that_is_not_required() -> None:
    doc = document("invoice.fetch")
    doc["contract"]["affordance"]["input_schema"]["required"] = []
    with pytest.raises(ContractRefused) as refused:
        admit(doc, "custom.json")
    message = str(refused.value)
    assert "binding.tenant_binding[0].argument of invoice.fetch 1.0.0 names 'invoice_id'" in message
    assert "must be required" in message


# --- the runtime fails closed anyway ----------------------------------------------------------


def unadmitted(name: str, mutate: Any) -> Contract:
    """A contract as a loader that skipped admission would hold it."""
    doc = document(name)
    mutate(doc)
    return Contract(doc["contract"], doc["binding"], "unadmitted")


def test_a_row_that_does_not_say_whose_it_is_is_nobodys() -> None:
    assert owned(({"id": "inv_1", "tenant_id": "acme"},), "acme") is not None
    assert owned(({"id": "inv_1", "tenant_id": "globex"},), "acme") is None
    assert owned(({"id": "inv_1", "status": "open"},), "acme") is None
    assert owned(({"id": "inv_1", "tenant_id": None},), "acme") is None


def test_the_tenant_gate_refuses_a_resource_whose_lookup_forgot_tenant_id() -> None:
    fetch = unadmitted("invoice.fetch", lambda d: _set(d, ("tenant_binding", 0, "lookup"), NO_TENANT))
    record = stage_record(fetch, {"invoice_id": "inv_globex0001"})
    facts = {(lookup, value): ({"id": value, "status": "open"},) for lookup, value in refs(record, fetch)}
    decision = decide(
        record, fetch, load_budgets(), facts, Usage(), "event-1", 0, "dev", verdict=verdict_of(record, fetch)
    )
    assert isinstance(decision, Deny)
    assert (decision.taxonomy_class, decision.errors[0].code) == (TaxonomyClass.STALE_STATE, "resource_missing")


def test_the_tenant_gate_refuses_an_absent_bound_argument_of_an_optional_one() -> None:
    def optional(doc: dict[str, Any]) -> None:
        doc["contract"]["affordance"]["input_schema"]["required"] = []

    fetch = unadmitted("invoice.fetch", optional)
    for arguments in ({}, {"invoice_id": None}):
        record = stage_record(fetch, arguments)
        decision = decide(
            record, fetch, load_budgets(), {}, Usage(), "event-1", 0, "dev", verdict=verdict_of(record, fetch)
        )
        assert isinstance(decision, Deny) and not isinstance(decision, Allow)
        assert (decision.taxonomy_class, decision.errors[0].code) == (
            TaxonomyClass.PERMISSION_DENIED,
            "not_a_resource_id",
        )
        assert decision.errors[0].field == "invoice_id"


def test_an_approval_binds_no_state_of_a_row_that_does_not_say_whose_it_is() -> None:
    charge = registry().get("payment.charge_card", "1.0.0")
    record = stage_record(charge)
    [(lookup, value)] = target_state.refs(record, charge)
    row = {"id": value, "status": "open", "currency": "USD", "amount_cents": 125000}
    assert target_state.current(record, charge, {(lookup, value): (row,)}) is None
    assert target_state.bound_version(record, charge, {(lookup, value): (row,)}) == target_state.ABSENT
    assert target_state.current(record, charge, {(lookup, value): ({**row, "tenant_id": "acme"},)}) is not None
