"""The gates hold against an agent that plays its own keys, ids and arguments against them.

Through the real broker and Postgres: reused idempotency keys against budgets and rate limits,
keys that would reach a provider's URL as written or collide across tenants, a compensation
that names another effect, and lookups that would tell one tenant about another's resources.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from toolgate.client import Proposed
from toolgate.trust.agent_keys import AgentKeyring

from ..conftest import Pipeline
from .test_gates import Approvers, packet_of
from .test_pipeline import _approval_of, _ledger_for, errors_of, taxonomy

pytestmark = pytest.mark.timeout(180)


def new_tenant(pipeline: Pipeline) -> tuple[str, str]:
    """A tenant of its own (fresh budgets and rate windows), with an agent and an open invoice."""
    tenant = f"t{uuid.uuid4().hex[:8]}"
    agent = f"{tenant}-agent"
    for command in (
        ["tenants", "add", tenant],
        ["agents", "add", agent, "--tenant", tenant, "--scopes", "invoices:read,invoices:write,payments:charge"],
    ):
        done = pipeline.cli(*command)
        assert done.returncode == 0, done.stderr
    pipeline.sql(
        "INSERT INTO demo.customers (customer_id, tenant_id, name, email) VALUES (%s, %s, 'T', 't@t.example')",
        (f"cust_{tenant}", tenant),
    )
    pipeline.sql(
        "INSERT INTO demo.invoices (invoice_id, tenant_id, customer_id, status, currency, amount_cents) "
        "VALUES (%s, %s, %s, 'open', 'USD', 5000)",
        (f"inv_{tenant}", tenant, f"cust_{tenant}"),
    )
    return tenant, agent


def as_agent(pipeline: Pipeline, agent: str, tool: str, arguments: Any, **kwargs: Any) -> Proposed:
    signer = AgentKeyring(pipeline.home / "agents").signer(agent)
    return pipeline.client.propose(tool, arguments, signer=signer, user_id="u", watch=True, **kwargs)


# --- budgets and rate limits -----------------------------------------------------------------


def test_one_key_reused_for_every_call_still_meets_the_rate_limit(pipeline: Pipeline) -> None:
    # invoice.tax_estimate allows 5 calls per 10 s per tenant; every call here carries one key.
    _, agent = new_tenant(pipeline)
    sent = [
        as_agent(
            pipeline, agent, "invoice.tax_estimate", {"amount_cents": 1000, "country": "DE"}, idempotency_key="same-key"
        )
        for _ in range(7)
    ]
    answers = [taxonomy(pipeline.wait(s)) for s in sent]
    assert sorted(answers) == ["RATE_LIMITED"] * 2 + ["SUCCESS"] * 5


def test_a_read_sent_again_under_its_call_id_is_answered_from_its_first_outcome_and_counted_once(
    pipeline: Pipeline,
) -> None:
    tenant, agent = new_tenant(pipeline)
    arguments = {"amount_cents": 1000, "country": "DE"}
    first = as_agent(pipeline, agent, "invoice.tax_estimate", arguments, logical_operation_id="op-read")
    assert taxonomy(pipeline.wait(first)) == "SUCCESS"
    for _ in range(6):  # the same call again, as a client re-sends it: it is the same call
        as_agent(
            pipeline,
            agent,
            "invoice.tax_estimate",
            arguments,
            call_id=first.call_id,
            run_id=first.run_id,
            logical_operation_id="op-read",
        )
    deadline = time.monotonic() + 30
    answers: list[tuple[str, bool]] = []
    while len(answers) < 7 and time.monotonic() < deadline:
        answers = [
            (str(o.observation.status.taxonomy_class), o.observation.execution_metadata.idempotency_hit)
            for o in pipeline.client.observations(
                tenant_id=tenant, call_ids=[first.call_id], start_offsets=first.start_offsets, idle_timeout=1.0
            )
        ]
    # It ran once and counted once (review N5): the rate limit (5 per 10 s) was never reached.
    assert sorted(answers) == [("SUCCESS", False)] + [("SUCCESS", True)] * 6
    assert pipeline.sql("SELECT count(*) FROM toolgate.usage_events WHERE tenant_id = %s", (tenant,)) == [(1,)]


def test_a_key_spent_on_a_cheap_read_buys_no_charge_past_a_budget_of_zero(pipeline: Pipeline) -> None:
    tenant, agent = new_tenant(pipeline)  # a new tenant is granted no critical mutation
    cheap = as_agent(
        pipeline, agent, "invoice.tax_estimate", {"amount_cents": 1, "country": "DE"}, idempotency_key="k-shared"
    )
    assert taxonomy(pipeline.wait(cheap)) == "SUCCESS"
    charge = as_agent(
        pipeline,
        agent,
        "payment.charge_card",
        {"invoice_id": f"inv_{tenant}", "amount_cents": 5000, "currency": "USD"},
        idempotency_key="k-shared",
    )
    answer = pipeline.wait(charge, final=False)
    assert (taxonomy(answer), errors_of(answer)) == ("BUDGET_EXHAUSTED", [(None, "budget.critical_mutation")])


# --- idempotency keys --------------------------------------------------------------------------


def test_a_key_a_url_could_misread_is_refused(pipeline: Pipeline) -> None:
    for key in ("../admin", "a?b=c", "line\r\nX-Evil: 1", "with space"):
        answer = pipeline.call(
            "payment.charge_card",
            {"invoice_id": "inv_acme0002", "amount_cents": 125000, "currency": "USD"},
            idempotency_key=key,
        )
        assert (taxonomy(answer), errors_of(answer)) == ("OUT_OF_BOUNDS", [("idempotency_key", "bad_characters")])


def test_two_tenants_with_the_same_key_are_two_operations_at_the_provider(pipeline: Pipeline) -> None:
    key = f"mail-{uuid.uuid4().hex[:8]}"
    email = {"to": "ap@coyote.example", "subject": "Same", "body": "Same body"}
    approvers = Approvers(pipeline)
    try:
        for tenant in ("acme", "globex"):
            sent = pipeline.propose("notify.send_email", email, tenant_id=tenant, idempotency_key=key)
            approvers.decide(packet_of(pipeline, _approval_of(pipeline, sent)), "carol")
            answer = pipeline.wait(sent)
            assert taxonomy(answer) == "SUCCESS" and answer["execution_metadata"]["idempotency_hit"] is False
    finally:
        approvers.close()
    assert len(_ledger_for(pipeline, key, "acme")) == 1 and len(_ledger_for(pipeline, key, "globex")) == 1


def test_two_tenants_may_use_the_same_call_id_and_each_gets_its_own_approval(pipeline: Pipeline) -> None:
    call_id = f"call_{uuid.uuid4().hex}"
    email = {"to": "ap@coyote.example", "subject": "Shared call id", "body": "Each tenant's own"}
    sent = {t: pipeline.propose("notify.send_email", email, tenant_id=t, call_id=call_id) for t in ("acme", "globex")}
    approvals = {t: _approval_of(pipeline, s) for t, s in sent.items()}
    assert approvals["acme"] != approvals["globex"]
    approvers = Approvers(pipeline)
    try:
        for tenant in ("acme", "globex"):
            approvers.decide(packet_of(pipeline, approvals[tenant]), "carol")
            assert taxonomy(pipeline.wait(sent[tenant])) == "SUCCESS"
    finally:
        approvers.close()


# --- compensation ------------------------------------------------------------------------------


def test_a_compensation_that_names_another_effect_undoes_nothing(pipeline: Pipeline) -> None:
    draft = {
        "customer_id": "cust_acme01",
        "currency": "USD",
        "due_date": "2030-12-31",
        "lines": [{"description": "comp", "quantity": 1, "unit_amount_cents": 100}],
    }
    first = pipeline.call("invoice.create_draft", draft)
    second = pipeline.call("invoice.create_draft", {**draft, "memo": "the other one"})
    first_call = first["tool_identity"]["call_id"]
    other_invoice = second["result_payload"]["data"]["invoice_id"]
    answer = pipeline.call("invoice.void_draft", {"invoice_id": other_invoice}, compensation_of=first_call)
    assert (taxonomy(answer), errors_of(answer)) == ("POLICY_VIOLATION", [("arguments", "compensation_mismatch")])
    assert pipeline.sql("SELECT status FROM demo.invoices WHERE invoice_id = %s", (other_invoice,)) == [("draft",)]
    assert pipeline.sql("SELECT status FROM toolgate.idempotency_keys WHERE call_id = %s", (first_call,)) == [
        ("COMPLETED",)
    ]


# --- what a tenant may learn -------------------------------------------------------------------


def test_another_tenants_resource_is_answered_as_one_that_does_not_exist(pipeline: Pipeline) -> None:
    charge = {"amount_cents": 750000, "currency": "USD"}
    foreign = pipeline.call("payment.charge_card", {**charge, "invoice_id": "inv_globex0001"})
    missing = pipeline.call("payment.charge_card", {**charge, "invoice_id": "inv_acme9999"})
    assert (taxonomy(foreign), errors_of(foreign)) == (taxonomy(missing), errors_of(missing))
    assert errors_of(foreign) == [("invoice_id", "resource_missing")]
    assert "EUR" not in str(foreign)  # globex's invoice currency is never compared, never told
    for read in ("inv_globex0001", "inv_acme9999"):
        assert errors_of(pipeline.call("invoice.fetch", {"invoice_id": read})) == [("invoice_id", "resource_missing")]
    audited = pipeline.sql(
        "SELECT detail->>'finding' FROM toolgate.audit_log WHERE call_id = %s AND action = 'refused'",
        (foreign["tool_identity"]["call_id"],),
    )
    assert audited == [("cross_tenant",)]  # the operator still sees what it was
