"""Budgets of value (issue 51, part 2) through the real broker and Postgres: a `toolgate up` whose
policy set (TOOLGATE_POLICY_DIR: the shipped Cedar policies, budgets.json with money limits per
run and per tenant per day, a currency for each test so that none depends on another's spending)
reserves each card charge's money in the policy round that allows it.

A charge that would take its run over the limit is refused BUDGET_EXHAUSTED, naming the
dimension, the scope, what is spent and the limit; once the charge that reserved the money is
denied by an approver, or fails at the provider (FAILED_FINAL), its money is released, exactly
once, and a later charge of the run fits. Fifty charges proposed at once against a day's budget
that admits only part of them: exactly as many are allowed as fit, the rest refused
BUDGET_EXHAUSTED, the money spent is never above the limit, and every call has exactly one final
observation. A dry run shows where it would leave the budgets, and spends nothing."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolgate.client import Proposed
from toolgate.contracts.budgets import BUDGETS_FILE, load_budgets
from toolgate.contracts.cedar_policy import policy_files
from toolgate.schemas.codec import codec
from toolgate.schemas.hashing import operation_event
from toolgate.schemas.models import StageRecord

from ..conftest import Pipeline, started
from .test_cedar_policy import policy_detail
from .test_gates import Approvers, decision_audit, packet_of
from .test_pipeline import _approval_of, errors_of, taxonomy

pytestmark = pytest.mark.timeout(600)

CENTS = 125_000  # 1,250: two approvals of finance-controllers (alice, bob); no Cedar rule on it below 5,000 USD
EUR_RUN = 200_000  # the release test's: one charge of a run fits, two do not
USD_DAY = 2_000_000  # the fifty charges': sixteen fit
GBP_RUN, GBP_DAY = 1_000_000, 5_000_000  # the dry run's
LIMITS = {
    "per_run": {"money:EUR": EUR_RUN, "money:GBP": GBP_RUN},
    "per_tenant_per_day": {"money:USD": USD_DAY, "money:GBP": GBP_DAY},
}


def spent(pipeline: Pipeline, currency: str) -> int:
    """acme's money reserved today in `currency`, as the policy stage reads it."""
    [(used,)] = pipeline.sql(
        "SELECT coalesce(sum(used), 0)::bigint FROM toolgate.usage_value_daily WHERE tenant_id = 'acme' "
        "AND dimension = %s AND day = (now() AT TIME ZONE 'UTC')::date",
        (f"money:{currency}",),
    )
    return int(used)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pipeline]:
    policies = tmp_path_factory.mktemp("value-policies")
    for source, text in policy_files():
        (policies / Path(source).name).write_text(text)
    document = load_budgets().document
    document["value_budgets"] = LIMITS
    (policies / BUDGETS_FILE).write_text(json.dumps(document))
    home = tmp_path_factory.mktemp("value-home")
    with started(home, partitions=2, TOOLGATE_POLICY_DIR=str(policies)) as running:
        yield running


def arguments_of(pipeline: Pipeline, currency: str) -> dict[str, Any]:
    """A charge of 1,250 in `currency` on an open invoice of its own (a charge settles its invoice)."""
    invoice = pipeline.open_invoice(amount_cents=CENTS, currency=currency)
    return {"invoice_id": invoice, "amount_cents": CENTS, "currency": currency}


def charge(pipeline: Pipeline, currency: str, run_id: str) -> Proposed:
    """A 1,250 charge in `currency` of run `run_id`, a new operation."""
    key = f"charge-{uuid.uuid4().hex}"
    return pipeline.propose("payment.charge_card", arguments_of(pipeline, currency), idempotency_key=key, run_id=run_id)


def reservation(pipeline: Pipeline, sent: Proposed) -> list[tuple[Any, ...]]:
    """(amount, released, ended) of what the charge reserved."""
    event = operation_event(held_call(pipeline, sent))
    return pipeline.sql(
        "SELECT amount, released_at IS NOT NULL, ended FROM toolgate.usage_values WHERE event_id = %s", (event,)
    )


def held_call(pipeline: Pipeline, sent: Proposed) -> Any:
    """The call as the policy stage judged it (the ticket's request)."""
    [(request,)] = pipeline.sql("SELECT request FROM toolgate.approvals WHERE call_id = %s", (sent.call_id,))
    return codec().decode(bytes(request), StageRecord).call


def approve(pipeline: Pipeline, approvers: Approvers, approval_id: str) -> None:
    packet = packet_of(pipeline, approval_id)
    for who in ("alice", "bob"):
        decided = approvers.decide(packet, who)
        assert decision_audit(pipeline, decided.decision_id)[0] == "decision_counted"


def test_a_denied_or_failed_charge_releases_its_money_so_a_later_charge_of_the_run_fits(stack: Pipeline) -> None:
    pipeline, approvers = stack, Approvers(stack)
    run_id = f"run_{uuid.uuid4().hex[:10]}"
    day_before = spent(pipeline, "EUR")
    try:
        first = charge(pipeline, "EUR", run_id)
        first_approval = _approval_of(pipeline, first)  # held for approval, its 1,250 EUR reserved
        assert reservation(pipeline, first) == [(CENTS, False, False)]
        over = pipeline.wait(charge(pipeline, "EUR", run_id))
        assert (taxonomy(over), errors_of(over)) == ("BUDGET_EXHAUSTED", [(None, "budget.money:EUR")])
        [error] = over["result_payload"]["errors"]
        assert error["message"] == (
            "the money:EUR budget per run would be exceeded: 125000 of 200000 is spent, "
            "and this call would spend 125000"
        )

        denied = approvers.decide(packet_of(pipeline, first_approval), "alice", approve=False)
        assert decision_audit(pipeline, denied.decision_id)[0] == "decision_counted"
        assert taxonomy(pipeline.wait(first)) == "CONFIRMATION_MISSING"
        assert reservation(pipeline, first) == [(CENTS, True, False)]  # released, once

        second = charge(pipeline, "EUR", run_id)  # fits again
        second_approval = _approval_of(pipeline, second)
        pipeline.provider("/_control/faults", {"fail_statuses": [400]})  # the provider refuses it
        try:
            approve(pipeline, approvers, second_approval)
            failed = pipeline.wait(second, timeout=60)
        finally:
            pipeline.provider("/_control/faults", {})
        assert taxonomy(failed) == "SEMANTIC_INVALIDITY", failed
        assert reservation(pipeline, second) == [(CENTS, True, True)]  # the operation ended: released for good

        third = charge(pipeline, "EUR", run_id)  # fits again
        approve(pipeline, approvers, _approval_of(pipeline, third))
        assert taxonomy(pipeline.wait(third, timeout=60)) == "SUCCESS"
        assert reservation(pipeline, third) == [(CENTS, False, False)]  # success keeps it spent
    finally:
        approvers.close()
    assert spent(pipeline, "EUR") == day_before + CENTS  # only the third's


def test_fifty_charges_at_once_spend_the_days_money_exactly_to_its_limit(stack: Pipeline) -> None:
    pipeline, approvers = stack, Approvers(stack)
    spent_before = spent(pipeline, "USD")
    fit = (USD_DAY - spent_before) // CENTS
    assert 0 < fit < 50
    arguments = [arguments_of(pipeline, "USD") for _ in range(50)]
    sent = [
        pipeline.propose("payment.charge_card", a, idempotency_key=f"charge-{uuid.uuid4().hex}", flush=False)
        for a in arguments
    ]
    pipeline.client.flush()
    first = {s.call_id: pipeline.wait(s, final=False) for s in sent}
    held = [s for s in sent if first[s.call_id]["status"]["code"] == 202]
    refused = [s for s in sent if s not in held]
    assert len(held) == fit, [taxonomy(o) for o in first.values()]
    assert {(taxonomy(first[s.call_id]), errors_of(first[s.call_id])[0][1]) for s in refused} == {
        ("BUDGET_EXHAUSTED", "budget.money:USD")
    }
    assert all(first[s.call_id]["status"]["requires_approval"] for s in held)
    assert spent(pipeline, "USD") == spent_before + fit * CENTS <= USD_DAY
    try:
        for s in held:
            approve(pipeline, approvers, str(first[s.call_id]["result_payload"]["data"]["approval"]["approval_id"]))
        assert {taxonomy(pipeline.wait(s, timeout=90)) for s in held} == {"SUCCESS"}
    finally:
        approvers.close()
    time.sleep(3.0)  # anything a stage would have said twice has been said by now
    finals: dict[str, int] = {}
    for seen in pipeline.client.observations(tenant_id="acme", call_ids=[s.call_id for s in sent]):
        if seen.is_final:
            finals[seen.call_id] = finals.get(seen.call_id, 0) + 1
    assert finals == dict.fromkeys((s.call_id for s in sent), 1)
    assert spent(pipeline, "USD") <= USD_DAY
    unreleased = pipeline.sql(
        "SELECT coalesce(sum(amount), 0)::bigint FROM toolgate.usage_values "
        "WHERE tenant_id = 'acme' AND dimension = 'money:USD' AND released_at IS NULL"
    )
    assert unreleased == [(spent_before + fit * CENTS,)]


def test_a_dry_run_shows_where_the_charge_would_leave_the_money_budgets_and_spends_nothing(stack: Pipeline) -> None:
    pipeline = stack
    before = spent(pipeline, "GBP")
    _, detail = policy_detail(pipeline, arguments_of(pipeline, "GBP"))
    [budgets] = [part for part in detail.split(";") if part.startswith("budgets:")]
    assert f"money:GBP per_run: {CENTS} of {GBP_RUN}" in budgets, detail
    assert f"money:GBP per_tenant_per_day: {before + CENTS} of {GBP_DAY}" in budgets, detail
    assert spent(pipeline, "GBP") == before  # a dry run spends nothing
