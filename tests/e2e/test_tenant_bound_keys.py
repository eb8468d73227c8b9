"""One tenant's idempotency keys and ids never reach another's (N9), through the real broker and
Postgres.

invoice.create_draft made a draft's id from the caller's raw key, under a deployment-wide primary
key: globex drafting under "order-2026-0001" made acme's later draft under the same key fail
(FAILED_FINAL, every retry replaying it), and the unique-violation text told acme why. Statements
now get the key bound to the tenant (ctx.operation_key) and invoices are keyed by (tenant, id):
both drafts succeed, each tenant's own, and nothing of one is in the other's answers. An id that
two tenants both hold is each tenant's own resource to every gate and statement.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from tests.unit.factories import draft_key

from ..conftest import Pipeline
from .test_pipeline import errors_of, taxonomy

pytestmark = pytest.mark.timeout(180)

LINES = [{"description": "Consulting", "quantity": 1, "unit_amount_cents": 1000}]


def _draft(customer: str) -> dict[str, Any]:
    return {"customer_id": customer, "currency": "USD", "due_date": "2030-12-31", "lines": LINES}


def test_two_tenants_drafting_under_one_key_each_get_their_own_invoice(pipeline: Pipeline) -> None:
    key = f"order-2026-{uuid.uuid4().hex[:8]}"
    globex = pipeline.call("invoice.create_draft", _draft("cust_globex01"), tenant_id="globex", idempotency_key=key)
    acme = pipeline.call("invoice.create_draft", _draft("cust_acme01"), tenant_id="acme", idempotency_key=key)
    assert taxonomy(globex) == taxonomy(acme) == "SUCCESS", errors_of(acme)
    assert acme["execution_metadata"]["idempotency_hit"] is False
    ids = {t: o["result_payload"]["data"]["invoice_id"] for t, o in (("globex", globex), ("acme", acme))}
    assert ids["acme"] != ids["globex"]
    for tenant, invoice in ids.items():
        rows = pipeline.sql("SELECT tenant_id, operation_key FROM demo.invoices WHERE invoice_id = %s", (invoice,))
        assert rows == [(tenant, draft_key(key, tenant))]
    # Nothing of globex's draft is in acme's answer, and the caller's key is in neither id.
    said = json.dumps(acme)
    assert ids["globex"] not in said and "globex" not in said
    assert key not in ids["acme"] and key not in ids["globex"]
    # Each tenant's retry under the key replays its own draft.
    again = pipeline.call("invoice.create_draft", _draft("cust_acme01"), tenant_id="acme", idempotency_key=key)
    assert taxonomy(again) == "SUCCESS" and again["execution_metadata"]["idempotency_hit"] is True
    assert again["result_payload"]["data"]["invoice_id"] == ids["acme"]


def test_an_id_both_tenants_hold_is_each_ones_own(pipeline: Pipeline) -> None:
    invoice = f"inv_shared{uuid.uuid4().hex[:10]}"
    for tenant, customer, amount in (("acme", "cust_acme01", 1111), ("globex", "cust_globex01", 2222)):
        pipeline.sql(
            "INSERT INTO demo.invoices (invoice_id, tenant_id, customer_id, status, currency, amount_cents) "
            "VALUES (%s, %s, %s, 'draft', 'USD', %s)",
            (invoice, tenant, customer, amount),
        )
    fetched = {t: pipeline.call("invoice.fetch", {"invoice_id": invoice}, tenant_id=t) for t in ("acme", "globex")}
    assert {t: taxonomy(o) for t, o in fetched.items()} == {"acme": "SUCCESS", "globex": "SUCCESS"}
    assert fetched["acme"]["result_payload"]["data"]["amount_cents"] == 1111
    assert fetched["globex"]["result_payload"]["data"]["amount_cents"] == 2222
    voided = pipeline.call("invoice.void_draft", {"invoice_id": invoice}, tenant_id="globex")
    assert taxonomy(voided) == "SUCCESS"
    statuses = pipeline.sql("SELECT tenant_id, status FROM demo.invoices WHERE invoice_id = %s ORDER BY 1", (invoice,))
    assert statuses == [("acme", "draft"), ("globex", "void")]
