"""The semantic gate and repair-loop control (workers/validation/semantic.py, repair.py)."""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

from tests.unit.factories import first_example, proposal, registry
from toolgate.contracts.contract import Contract
from toolgate.schemas.models import FieldError
from toolgate.workers.validation import repair, semantic

TODAY = dt.date(2026, 11, 22)


def with_rules(name: str, rules: list[dict[str, Any]]) -> Contract:
    base = registry().resolve(name, "latest")
    binding = copy.deepcopy(dict(base.binding))
    binding["semantic_rules"] = rules
    return Contract(base.document, binding, "test")


def test_a_due_date_in_the_past_is_semantically_invalid() -> None:
    draft = registry().resolve("invoice.create_draft", "latest")
    args = first_example(draft)
    assert semantic.findings(args, draft, {}, TODAY, "acme") == []
    [finding] = semantic.findings({**args, "due_date": "2026-11-21"}, draft, {}, TODAY, "acme")
    assert (finding.field, finding.code) == ("due_date", "semantic.due-date-not-past")
    assert semantic.findings({**args, "due_date": "2026-11-22"}, draft, {}, TODAY, "acme") == []  # today is fine


def test_a_charge_must_be_in_its_invoices_currency() -> None:
    charge = registry().resolve("payment.charge_card", "latest")
    args = first_example(charge)
    [(lookup, invoice)] = semantic.refs(args, charge)
    facts = {(lookup, invoice): ({"id": invoice, "tenant_id": "acme", "currency": "USD"},)}
    assert semantic.findings(args, charge, facts, TODAY, "acme") == []
    [finding] = semantic.findings({**args, "currency": "EUR"}, charge, facts, TODAY, "acme")
    assert (finding.field, finding.expected, finding.actual) == ("currency", "USD", "EUR")
    assert (
        semantic.findings({**args, "currency": "EUR"}, charge, {}, TODAY, "acme") == []
    )  # missing: the state gate says so
    # Another tenant's invoice is as good as missing: its currency is never compared, nor told.
    foreign = {(lookup, invoice): ({"id": invoice, "tenant_id": "globex", "currency": "USD"},)}
    assert semantic.findings({**args, "currency": "EUR"}, charge, foreign, TODAY, "acme") == []
    # So is a row that does not say whose it is (N15: fail closed).
    unowned = {(lookup, invoice): ({"id": invoice, "currency": "USD"},)}
    assert semantic.findings({**args, "currency": "EUR"}, charge, unowned, TODAY, "acme") == []


def test_ordered_fields_cross_field_rule() -> None:
    rule = {"id": "period", "rule": "ordered", "first": "start", "then": "end", "message": "end before start"}
    c = with_rules("invoice.fetch", [rule])
    assert semantic.findings({"start": "2026-01-01", "end": "2026-02-01"}, c, {}, TODAY, "acme") == []
    assert semantic.findings({"start": "2026-01-01", "end": "2026-01-01"}, c, {}, TODAY, "acme") == []
    [finding] = semantic.findings({"start": "2026-03-01", "end": "2026-02-01"}, c, {}, TODAY, "acme")
    assert finding.code == "semantic.period"
    strict = with_rules("invoice.fetch", [{**rule, "strict": True}])
    assert len(semantic.findings({"start": 5, "end": 5}, strict, {}, TODAY, "acme")) == 1


ERR = (FieldError(field="invoice_id", code="type_mismatch", message="m"),)
EARLIER = repair.Earlier(frozenset({"p1"}), frozenset({"e1"}), attempts=1, run_failures=4)


def test_repair_loop_ends_on_a_repeated_payload_or_error_or_limits() -> None:
    assert repair.exhausted("p2", "e2", EARLIER, max_attempts=3, run_budget=50) is None
    assert "same invalid arguments" in (repair.exhausted("p1", "e2", EARLIER, 3, 50) or "")
    assert "same validation errors" in (repair.exhausted("p2", "e1", EARLIER, 3, 50) or "")
    assert "2 invalid attempts" in (repair.exhausted("p2", "e2", EARLIER, 2, 50) or "")
    assert "repair budget of 5" in (repair.exhausted("p2", "e2", EARLIER, 3, 5) or "")
    first = repair.Earlier(frozenset(), frozenset(), 0, 0)
    assert repair.exhausted("p", "e", first, 3, 50) is None


def test_fingerprints() -> None:
    a = proposal("invoice.fetch", '{"invoice_id": 1}')
    b = proposal("invoice.fetch", ' {"invoice_id": 1} ', call_id="call_2")
    assert repair.payload_fingerprint(a) == repair.payload_fingerprint(b)  # same arguments, another call
    assert repair.payload_fingerprint(a) != repair.payload_fingerprint(proposal("invoice.fetch", '{"invoice_id": 2}'))
    reordered = (FieldError(field="b", code="y", message="m2"), FieldError(field="a", code="x", message="m1"))
    assert repair.error_fingerprint(reordered) == repair.error_fingerprint(tuple(reversed(reordered)))
    assert repair.error_fingerprint(ERR) != repair.error_fingerprint(reordered)
    head, *rest = repair.exhaustion_errors("why", ERR)
    assert head.code == "repair_loop_exhausted" and tuple(rest) == ERR
