"""Budgets of value (issue 51, part 2), pure: the values a contract derives from a call's
arguments (contracts/values.py), their admission, the value limits of budgets.json
(contracts/budgets.py), and gate 10's value budgets as a round decides them
(workers/policy/values.py, round_decisions.py): a call whose value would exceed a budget is
refused BUDGET_EXHAUSTED naming dimension, scope, amount used and limit; the round's calls spend
in order; a dry run checks and spends nothing; a retry of an operation counted before spends
nothing again, unless its value was released without its operation ending. No I/O."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests.unit.factories import registry
from tests.unit.test_cedar_policy import NOON, contract, shipped
from tests.unit.test_decision_record import recorded_round
from tests.unit.test_execution_decision import DRAFT
from tests.unit.test_execution_machine import call as machine_call
from tests.unit.test_execution_machine import key_row, recorded, reserved
from tests.unit.test_policy_round import Call, call, charge, outcome
from toolgate.contracts import admission
from toolgate.contracts.admission import ContractRefused
from toolgate.contracts.budgets import Budgets, load_budgets
from toolgate.contracts.budgets import admit as admit_budgets
from toolgate.contracts.policy_set import load_policy_set
from toolgate.contracts.values import derive, problems, spent_values
from toolgate.ops import whatif
from toolgate.schemas.hashing import usage_events
from toolgate.schemas.models import TaxonomyClass
from toolgate.states import KeyStatus
from toolgate.workers.execution import asks
from toolgate.workers.execution.compensation import Original
from toolgate.workers.execution.effects import Done, failed
from toolgate.workers.policy.case import Usage
from toolgate.workers.policy.decision import Allow, Deny, refs
from toolgate.workers.policy.round_decisions import decide_round

MONEY = [{"dimension": "money", "sum": "amount_cents", "unit": "currency"}]


def test_the_shipped_contracts_derive_money_by_currency_and_recipients() -> None:
    charge_card = contract("payment.charge_card")
    assert spent_values(charge_card, {"invoice_id": "inv_x", "amount_cents": 125_000, "currency": "USD"}) == {
        "money:USD": 125_000
    }
    assert spent_values(charge_card, {"amount_cents": 900, "currency": "EUR"}) == {"money:EUR": 900}
    assert spent_values(contract("notify.send_email"), {"to": "a@b.example", "subject": "s", "body": "b"}) == {
        "recipients": 1
    }
    bulk = {"messages": [{"to": f"{i}@b.example", "subject": "s", "body": "b"} for i in range(3)]}
    assert spent_values(contract("notify.send_bulk"), bulk) == {"recipients": 3}
    assert spent_values(contract("invoice.fetch"), {"invoice_id": "inv_x"}) == {}


def test_derivations_of_one_dimension_add_up_and_nothing_is_spent_of_zero() -> None:
    binding = {"values": [{"dimension": "recipients", "count": "to"}, {"dimension": "recipients", "count": "cc"}]}
    assert derive(binding, {"to": ["a", "b"], "cc": ["c"]}) == {"recipients": 3}
    assert derive(binding, {"to": [], "cc": None}) == {}
    assert derive({"values": MONEY}, {"amount_cents": True, "currency": "USD"}) == {}  # a bool is no amount


SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["amount_cents", "currency", "to"],
    "properties": {
        "amount_cents": {"type": "integer", "minimum": 1},
        "currency": {"type": "string", "enum": ["USD", "EUR"]},
        "to": {"type": "string"},
        "price": {"type": "number", "minimum": 0},
        "signed": {"type": "integer"},
        "optional": {"type": "integer", "minimum": 0},
        "free_unit": {"type": "string"},
        "flag": {"type": "boolean"},
    },
}


@pytest.mark.parametrize(
    ("rule", "problem"),
    [
        ({"dimension": "money", "sum": "price"}, "'price', which is not an integer in the input schema"),
        ({"dimension": "money", "sum": "missing"}, "'missing', which is not an integer in the input schema"),
        ({"dimension": "money", "sum": "signed"}, "'signed', which the input schema does not require"),
        ({"dimension": "money", "sum": "optional"}, "'optional', which the input schema does not require"),
        ({"dimension": "recipients", "count": "flag"}, "'flag', which is not an array or a string"),
        ({"dimension": "money", "sum": "amount_cents", "unit": "free_unit"}, "'free_unit', which the input schema"),
        ({"dimension": "money", "sum": "amount_cents", "unit": "to"}, "'to', which has no enum of plain names"),
    ],
)
def test_admission_refuses_a_derivation_that_could_spend_nothing_or_name_no_budget(
    rule: dict[str, Any], problem: str
) -> None:
    [found] = problems("t.tool", "1.0.0", {"values": [rule]}, SCHEMA)
    assert found.startswith("binding.values[0] of t.tool 1.0.0 names "), found
    assert problem in found, found


def test_admission_refuses_a_negative_amount_and_admits_the_shipped_derivations() -> None:
    schema = copy.deepcopy(SCHEMA)
    schema["properties"]["amount_cents"]["minimum"] = -5
    [found] = problems("t.tool", "1.0.0", {"values": MONEY}, schema)
    assert "allows a negative amount" in found
    assert problems("t.tool", "1.0.0", {"values": [*MONEY, {"dimension": "recipients", "count": "to"}]}, SCHEMA) == []


def test_a_contract_whose_derivation_names_a_non_integer_argument_is_refused() -> None:
    charge_card = contract("payment.charge_card")
    document = {
        "contract": copy.deepcopy(dict(charge_card.document)),
        "binding": copy.deepcopy(dict(charge_card.binding)),
    }
    document["binding"]["values"] = [{"dimension": "money", "sum": "invoice_id", "unit": "currency"}]
    with pytest.raises(
        ContractRefused, match=r"binding.values\[0\] of payment.charge_card 1.0.0 names sum 'invoice_id'"
    ):
        admission.admit(document, "charge.json")
    document["binding"]["values"] = [{"dimension": "money", "sum": "amount_cents", "count": "currency"}]
    with pytest.raises(ContractRefused):  # both a sum and a count: the binding schema refuses it
        admission.admit(document, "charge.json")


def budgets(per_run: dict[str, int], per_day: dict[str, int], grants: dict[str, Any] | None = None) -> Budgets:
    document = copy.deepcopy(load_budgets().document)
    document["value_budgets"] = {"per_run": per_run, "per_tenant_per_day": per_day, "grants": grants or {}}
    return admit_budgets(document, "budgets.json")


def test_value_limits_are_named_per_scope_with_tenant_grants_and_none_means_no_budget() -> None:
    policy = budgets({"money:USD": 500}, {"money:USD": 1000}, {"acme": {"per_tenant_per_day": {"money:USD": 7}}})
    assert policy.value_limit("acme", "per_run", "money:USD") == 500
    assert policy.value_limit("acme", "per_tenant_per_day", "money:USD") == 7
    assert policy.value_limit("other", "per_tenant_per_day", "money:USD") == 1000
    assert policy.value_limit("acme", "per_run", "money:EUR") is None
    assert load_budgets().value_limit("acme", "per_tenant_per_day", "money:USD") == 100_000_000
    for bad in ({"money:US D": 1}, {"money": -1}, {"Money": 1}):
        with pytest.raises(ContractRefused, match="budgets refused"):
            budgets(bad, {})


def round_of(policy: Budgets, calls: list[Call], used: Usage | None = None) -> tuple[list[Allow | Deny], Usage]:
    known: dict[Any, Any] = {}
    for record, c, _ in calls:
        row = {"tenant_id": "acme", "status": "open", "currency": "USD"}
        row["amount_cents"] = record.call.arguments.get("amount_cents", 125_000)
        known.update({(lookup, v): ({"id": v, **row},) for lookup, v in refs(record, c) if isinstance(v, str)})
    used = used or Usage()
    decisions = list(decide_round(policy, shipped(), calls, known, used, NOON, "dev", frozenset(), {}))
    return decisions, used


def test_a_rounds_charges_spend_in_order_until_the_budget_is_spent() -> None:
    policy = budgets({}, {"money:USD": 300_000})
    euros = call("payment.charge_card", 4, {"invoice_id": "inv_acme0004", "amount_cents": 1, "currency": "EUR"})
    calls = [charge(0, 100_000), charge(1, 150_000), charge(2, 100_000), charge(3, 50_000), euros]
    decisions, used = round_of(policy, calls)
    assert [outcome(d) for d in decisions] == ["allow 2", "allow 2", "budget.money:USD", "allow 2", "allow 2"]
    refused = decisions[2]
    assert isinstance(refused, Deny) and refused.taxonomy_class == "BUDGET_EXHAUSTED"
    [error] = refused.errors
    assert error.message == (
        "the money:USD budget per tenant per day would be exceeded: 250000 of 300000 is spent, "
        "and this call would spend 100000"
    )
    assert (error.expected, error.actual) == ("at most 50000", "100000")
    assert used.value_day == {("acme", "money:USD"): 300_000, ("acme", "money:EUR"): 1}
    allowed = decisions[0]
    assert isinstance(allowed, Allow) and allowed.values == (("money:USD", 100_000),)


def test_the_run_budget_holds_beside_the_days_and_reads_what_was_reserved_before() -> None:
    policy = budgets({"money:USD": 200_000}, {"money:USD": 10_000_000})
    first, second = charge(0, 150_000, run_id="run_a"), charge(1, 100_000, run_id="run_a")
    other_run = charge(2, 100_000, run_id="run_b")
    decisions, _ = round_of(policy, [first, second, other_run])
    assert [outcome(d) for d in decisions] == ["allow 2", "budget.money:USD", "allow 2"]
    assert "per run would be exceeded: 150000 of 200000" in decisions[1].errors[0].message  # type: ignore[union-attr]
    before = Usage(value_day={("acme", "money:USD"): 9_950_000})
    decisions, _ = round_of(policy, [charge(3, 100_000)], before)
    assert [outcome(d) for d in decisions] == ["budget.money:USD"]


def test_a_dry_run_checks_and_spends_nothing_and_its_preview_shows_the_value_standing() -> None:
    policy = budgets({"money:USD": 1_000_000}, {"money:USD": 300_000})
    decisions, used = round_of(policy, [charge(0, 100_000, dry_run=True), charge(1, 250_000, dry_run=True)])
    preview = decisions[0]
    assert isinstance(preview, Allow) and preview.values == () and preview.spends == ()
    assert "money:USD per_run: 100000 of 1000000" in preview.standing
    assert "money:USD per_tenant_per_day: 100000 of 300000" in preview.standing
    assert used.value_day == {} and used.value_run == {}
    over, _ = round_of(policy, [charge(2, 350_000, dry_run=True)])
    assert [outcome(d) for d in over] == ["budget.money:USD"]  # the real call would be refused


def test_a_retry_spends_nothing_again_unless_its_value_was_released_without_ending() -> None:
    policy = budgets({}, {"money:USD": 300_000})
    retried = charge(0, 200_000)
    counted = Usage(counted={retried[2]}, value_day={("acme", "money:USD"): 250_000})
    decisions, used = round_of(policy, [retried], counted)
    assert isinstance(decisions[0], Allow) and decisions[0].values == ()  # reserved when it first passed
    released = Usage(counted={retried[2]}, released={retried[2]}, value_day={("acme", "money:USD"): 50_000})
    decisions, used = round_of(policy, [retried, charge(1, 200_000)], released)
    assert [outcome(d) for d in decisions] == ["allow 2", "budget.money:USD"]
    assert isinstance(decisions[0], Allow) and decisions[0].values == (("money:USD", 200_000),)
    assert used.released == set() and used.value_day == {("acme", "money:USD"): 250_000}


def test_emails_spend_recipients_and_no_limit_named_means_no_value_budget() -> None:
    email = {"to": "a@b.example", "subject": "s", "body": "b"}
    calls = [call("notify.send_email", i, email) for i in range(3)]
    decisions, used = round_of(budgets({"recipients": 2}, {}), calls)
    assert [outcome(d) for d in decisions] == ["allow 1", "allow 1", "budget.recipients"]
    decisions, used = round_of(budgets({}, {}), [charge(i, 9_000_000) for i in range(3)])
    assert [outcome(d) for d in decisions] == ["policy.charge-hard-limit"] * 3  # Cedar's, not a budget's
    decisions, used = round_of(budgets({}, {}), [charge(i, 400_000) for i in range(3)])
    assert [outcome(d) for d in decisions] == ["allow 2"] * 3
    assert used.value_day == {("acme", "money:USD"): 1_200_000}  # reserved, though unlimited


def test_the_shipped_budgets_leave_the_tests_and_walkthroughs_charges_room() -> None:
    shipped_budgets = load_budgets()
    assert json.loads(json.dumps(shipped_budgets.document))["value_budgets"]["per_run"]["money:USD"] >= 1_000_000
    decisions, _ = round_of(shipped_budgets, [charge(0, 750_000), charge(1, 125_000), charge(2, 999_999)])
    assert all(isinstance(d, Allow) for d in decisions)


@pytest.mark.parametrize(
    ("effect", "releases"),
    [
        (failed(TaxonomyClass.SEMANTIC_INVALIDITY, "refused", "no", final=True), True),  # FAILED_FINAL: ended
        (failed(TaxonomyClass.DEPENDENCY_UNAVAILABLE, "busy", "later", final=False), False),  # may run again
        (Done({"invoice_id": "inv_1"}), False),  # success keeps its value spent
    ],
)
def test_execution_releases_the_value_of_an_operation_that_ended_failed_in_its_recording(
    effect: Any, releases: bool
) -> None:
    state, _ = reserved(machine_call(DRAFT), deferred=True)
    _, asked = recorded(state, [effect])
    writes = asked[-1].writes  # type: ignore[attr-defined]
    expected = list(usage_events(state.calls[0].record.call)) if releases else []
    assert writes.released == expected


@pytest.mark.parametrize(
    ("status", "attempt", "releases"),
    [
        (KeyStatus.FAILED_RETRYABLE, 99, True),  # no retries left: replayed as final, the operation ended
        (KeyStatus.FAILED_FINAL, 1, True),  # released when it ended; asked again, nothing changes
        (KeyStatus.COMPLETED, 1, False),  # a success's replay keeps its value spent
    ],
)
def test_a_replay_of_an_operation_that_ended_failed_releases_its_value(
    status: KeyStatus, attempt: int, releases: bool
) -> None:
    c = machine_call(DRAFT)
    row = key_row(c, status, attempt=attempt)
    locked = {asks.ReserveKeys: set(), asks.LockKeys: {(c.record.call.tenant_id, c.key): row}}
    state, _ = reserved(c, answer=locked)
    assert not state.calls[0].runs and state.calls[0].result is not None
    _, asked = recorded(state, [])
    writes = asked[-1].writes  # type: ignore[attr-defined]
    assert writes.released == (list(usage_events(c.record.call)) if releases else [])


def test_a_compensation_that_undoes_a_call_releases_what_the_call_reserved() -> None:
    void = registry().get("invoice.void_draft", "1.0.0")
    c = machine_call(void, arguments={"invoice_id": "inv_abcd7"}, compensation_of="call_0")
    original = Original(
        "acme",
        "key_0",
        KeyStatus.COMPLETED,
        "invoice.create_draft",
        "1.0.0",
        None,
        {},
        {"invoice_id": "inv_abcd7"},
        ("op_original", "read_original"),
    )
    answer = {asks.LoadOriginals: {("acme", "call_0"): original}}
    state, _ = reserved(c, deferred=True, answer=answer)
    assert state.calls[0].runs, state.calls[0].result
    _, asked = recorded(state, [Done({"invoice_id": "inv_abcd7", "status": "void"})])
    writes = asked[-1].writes  # type: ignore[attr-defined]
    assert writes.compensated and writes.released == ["op_original", "read_original"]


def test_a_decisions_record_carries_the_value_it_saw_and_whatif_judges_value_budgets_on_it(tmp_path: Path) -> None:
    """Part 3's record of a policy decision names the value reserved before it (its run's and its
    tenant's day, of the dimensions it spends): what-if under a set with a tighter money budget
    refuses exactly the charge that would have gone over it."""
    shipped_set = load_policy_set(registry())
    calls = [charge(1, run_id="run_v"), charge(2, run_id="run_v"), charge(3, run_id="run_v")]
    _, rows = recorded_round(shipped_set, calls)
    seen = [r.usage for r in rows if r.stage == "policy"]
    assert [u["values_run"] if u else None for u in seen] == [{}, {"money:USD": 125_000}, {"money:USD": 250_000}]
    assert all(u is not None and u["released"] is False for u in seen)
    for source in (Path(__file__).parents[2] / "contracts" / "cedar").iterdir():
        (tmp_path / source.name).write_text(source.read_text())
    document = json.loads((tmp_path / "budgets.json").read_text())
    document["value_budgets"]["per_run"]["money:USD"] = 300_000
    (tmp_path / "budgets.json").write_text(json.dumps(document))
    report = whatif.replay(rows, registry(), load_policy_set(registry(), tmp_path), revalidate=False).as_json()
    (change,) = report["changes"]
    assert (change["kind"], change["taxonomy_class"], change["count"]) == ("allowed -> refused", "BUDGET_EXHAUSTED", 1)
    assert [e["call_id"] for e in change["examples"]] == ["call_3"]


def test_a_round_reads_the_value_budgets_only_of_the_calls_that_spend_a_value() -> None:
    """No call of a contract without `values` spends one or has a reservation to find released:
    a round of them sends no value read; a round with a charge reads the charge's run and tenant."""
    from toolgate.schemas.models import PayloadKind
    from toolgate.store import values
    from toolgate.workers.policy.handler import UsageReads
    from toolgate.workers.runtime.emit import Origin
    from toolgate.workers.runtime.handler import Inbound

    def value_reads(calls: list[Call]) -> list[Any]:
        origin = Origin("validated", 0, 0, None, [], PayloadKind.STAGE_ITEM)
        rounds = [Inbound(record, b"", origin) for record, _, _ in calls]
        contracts = {id(r): c for r, (_, c, _) in zip(rounds, calls, strict=True)}
        reads = UsageReads(rounds, contracts, [event for _, _, event in calls], load_budgets())
        return [s for s in reads.statements() if s[0] in (values.PER_RUN, values.PER_DAY, values.RELEASED)]

    fetches = [call("invoice.fetch", i, {"invoice_id": f"inv_acme{i:04d}"}) for i in (1, 2)]
    assert value_reads(fetches) == []
    paid = charge(3, run_id="run_paid")
    run = (paid[0].call.tenant_id, paid[0].call.principal.agent_id, "run_paid")
    assert value_reads([*fetches, paid]) == values.reads(["acme"], [run], ["event-3"])
