"""What a refused proposal may cost validation is bounded before the work (N7), counted, never
timed: the errors jsonschema makes, the keyword evaluations it spends, the field errors an answer
carries. One signed 240 KiB create_draft with invalid lines made 14,401 errors and ~375 ms of CPU
on main; signed 64 to a root, one signature bought ~24 s of validation."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import jsonschema.exceptions
import pytest

from tests.unit.factories import TODAY, contracts, first_example, proposal, registry
from toolgate.contracts.contract import Contract
from toolgate.contracts.registry import Registry
from toolgate.contracts.schema_work import Spent, metered
from toolgate.schemas.models import TaxonomyClass
from toolgate.workers.validation.decision import Reject, decide
from toolgate.workers.validation.schema_budget import MAX_FINDINGS, WORK, fast_finding
from toolgate.workers.validation.schema_findings import _short

GOOD = {"description": "x", "quantity": 1, "unit_amount_cents": 1}
BAD = {"description": "", "quantity": 0, "unit_amount_cents": -1}


def draft_of(lines: list[dict[str, Any]], size: int | None = None) -> dict[str, Any]:
    """A create_draft's arguments; with `size`, its lines repeated until they fill `size` bytes."""
    args = {"customer_id": "cust_acme01", "currency": "USD", "due_date": "2030-12-31", "lines": lines}
    if size is not None:
        args["lines"] = lines * ((size - 100) // (len(json.dumps(lines[0])) + 2))
    return args


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """How many jsonschema errors are made meanwhile."""
    count = [0]
    original = jsonschema.exceptions._Error.__init__

    def counting(self: Any, *args: Any, **kwargs: Any) -> None:
        count[0] += 1
        original(self, *args, **kwargs)

    monkeypatch.setattr(jsonschema.exceptions._Error, "__init__", counting)
    yield count


def test_the_240_kib_proposal_of_the_review_makes_at_most_the_cap_of_errors(made: list[int]) -> None:
    args = draft_of([BAD], 240 * 1024)
    assert 240 * 1024 - 200 < len(json.dumps(args)) <= 240 * 1024 and len(args["lines"]) > 4000
    decision = decide(proposal("invoice.create_draft", args), registry(), TODAY)
    assert made[0] <= MAX_FINDINGS  # main: 12,082 (every line's three errors, and maxItems)
    assert isinstance(decision, Reject) and decision.taxonomy_class is TaxonomyClass.OUT_OF_BOUNDS
    assert len(decision.errors) <= MAX_FINDINGS and decision.work <= WORK
    head = decision.errors[0]
    assert (head.field, head.code, head.expected) == ("lines", "out_of_bounds.maxItems", "at most 50 items")
    assert len(head.actual or "") <= 80
    assert decision.errors[-1].code == "more_errors"


def test_findings_stop_at_the_cap_with_a_note_that_more_were_not_looked_for(made: list[int]) -> None:
    decision = decide(proposal("invoice.create_draft", draft_of([BAD] * 50)), registry(), TODAY)  # 150 errors in all
    assert isinstance(decision, Reject) and len(decision.errors) == MAX_FINDINGS
    assert made[0] <= MAX_FINDINGS
    assert decision.errors[-1].code == "more_errors" and "49 findings" in decision.errors[-1].message
    assert {e.code for e in decision.errors[:-1]} <= {
        "out_of_bounds.minLength",
        "out_of_bounds.minimum",
    }


def test_a_few_findings_are_all_told_without_a_note() -> None:
    decision = decide(proposal("invoice.create_draft", draft_of([GOOD, BAD])), registry(), TODAY)
    assert isinstance(decision, Reject)
    assert [(e.field, e.code) for e in decision.errors] == [
        ("lines[1].description", "out_of_bounds.minLength"),
        ("lines[1].quantity", "out_of_bounds.minimum"),
        ("lines[1].unit_amount_cents", "out_of_bounds.minimum"),
    ]


def unbounded_lines() -> tuple[Contract, Registry]:
    """create_draft as a custom contract whose lines have no maxItems: nothing stops the walk."""
    draft = registry().resolve("invoice.create_draft", "latest")
    doc = copy.deepcopy({"contract": dict(draft.document), "binding": dict(draft.binding)})
    del doc["contract"]["affordance"]["input_schema"]["properties"]["lines"]["maxItems"]
    doc["contract"]["identity"]["name"] = "custom.unbounded"
    custom = Contract(doc["contract"], doc["binding"], "test")
    return custom, Registry([*registry(), custom])


def test_work_is_bounded_where_the_schema_declares_no_size_and_the_refusal_still_fails_closed(
    made: list[int],
) -> None:
    custom, both = unbounded_lines()
    args = draft_of([GOOD], 240 * 1024)
    args["lines"][-1] = {**GOOD, "quantity": 0}  # the one mistake, past everything the budget reaches
    decision = decide(proposal(custom.name, args, tool_version=custom.version), both, TODAY)
    assert isinstance(decision, Reject) and decision.work == WORK
    assert made[0] == 0  # the budget was spent walking valid lines: the compiled validator names it
    last = len(args["lines"]) - 1
    assert [(e.field, e.code) for e in decision.errors] == [
        (f"lines[{last}].quantity", "out_of_bounds.minimum"),
        (None, "more_errors"),
    ]
    assert decision.taxonomy_class is TaxonomyClass.OUT_OF_BOUNDS
    assert str(WORK) in decision.errors[-1].message


def test_sizes_are_refused_whole_before_anything_inside_them_is_looked_at() -> None:
    args = draft_of([{**BAD, "description": "d" * 201}, GOOD])
    args["memo"] = "m" * 501
    decision = decide(proposal("invoice.create_draft", args), registry(), TODAY)
    assert isinstance(decision, Reject)
    assert [(e.field, e.code) for e in decision.errors] == [
        ("lines[0].description", "out_of_bounds.maxLength"),
        ("memo", "out_of_bounds.maxLength"),
        (None, "more_errors"),
    ]
    assert "only sizes were checked" in decision.errors[-1].message


def at_its_bounds(schema: dict[str, Any], value: Any) -> Any:
    """The value with every array grown to its schema's maxItems (copies of its first item)."""
    if isinstance(value, dict):
        props = schema.get("properties", {})
        return {k: at_its_bounds(props.get(k, {}), v) for k, v in value.items()}
    if isinstance(value, list) and value:
        items = schema.get("items", {})
        grown = value * schema["maxItems"] if "maxItems" in schema else value
        return [at_its_bounds(items, v) for v in grown[: schema.get("maxItems", len(grown))]]
    return value


@pytest.mark.parametrize("contract", contracts(), ids=lambda c: f"{c.name}@{c.version}")
def test_the_budget_checks_the_largest_arguments_each_shipped_contract_accepts_whole(contract: Contract) -> None:
    largest = at_its_bounds(dict(contract.input_schema), first_example(contract))
    assert contract.accepts_input(largest)
    with metered(WORK) as meter:
        assert list(contract.input_validator.iter_errors(largest)) == []
    assert meter.used <= WORK // 2, "the work budget leaves less than twice the largest arguments' checks"


def test_a_meter_stops_the_iteration_and_counts_nothing_outside_one() -> None:
    draft = registry().resolve("invoice.create_draft", "latest")
    args = draft_of([BAD] * 40)
    assert len(list(draft.input_validator.iter_errors(args))) == 120  # unmetered: every error
    with pytest.raises(Spent), metered(10):
        list(draft.input_validator.iter_errors(args))


def test_the_compiled_validators_violation_as_a_finding() -> None:
    draft = registry().resolve("invoice.create_draft", "latest")
    taxonomy, error = fast_finding(draft.input_violation(draft_of([GOOD, {**GOOD, "quantity": "2"}])))
    assert (taxonomy, error.field, error.code) == (TaxonomyClass.TYPE_MISMATCH, "lines[1].quantity", "type_mismatch")
    assert error.message.startswith("lines[1].quantity must be")
    taxonomy, error = fast_finding(draft.input_violation({"currency": "USD"}))
    assert taxonomy is TaxonomyClass.STRUCTURAL_VIOLATION and error.code == "schema.required"
    taxonomy, error = fast_finding(None)
    assert taxonomy is TaxonomyClass.STRUCTURAL_VIOLATION and error.code == "schema.violation"


def test_a_long_value_is_shown_short_without_being_written_out_whole() -> None:
    shown = _short([GOOD] * 100_000)
    assert len(shown) == 80 and shown.startswith('[{"description": "x"') and shown.endswith("...")
    assert _short({"k": [1, 2, 3]}) == '{"k": [1, 2, 3]}'
    assert _short("s" * 1000) == "s" * 77 + "..."
