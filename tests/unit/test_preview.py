"""The dry-run preview (workers/execution/preview.py)."""

from __future__ import annotations

import json

from tests.unit.factories import first_example, registry, stage_record
from toolgate.schemas.models import StageDecision
from toolgate.workers.execution.preview import effects, preview


def test_a_database_write_preview_names_table_consequence_and_compensation() -> None:
    draft = registry().resolve("invoice.create_draft", "latest")
    record = stage_record(
        draft,
        dry_run=True,
        decisions=[StageDecision(stage="policy", outcome="allow", detail="approvals:0;spends:-", at_ms=1)],
    )
    shown = preview(record, draft, "idem-key")
    assert shown["dry_run"] is True
    assert shown["effects"] == [{"kind": "database", "operation": "INSERT", "target": "demo.invoices"}]
    assert shown["would_execute"]["arguments"] == first_example(draft)
    assert shown["would_execute"]["idempotency_fingerprint"] not in (None, "idem-key")
    assert shown["preconditions"] == [{"stage": "policy", "outcome": "allow", "detail": "approvals:0;spends:-"}]
    impact = shown["impact"]
    assert impact["reversible"] is True and impact["compensation"] == "invoice.void_draft"
    assert impact["budget_dimensions"] == ["write"]
    assert shown["expected_after_state"] == {"status": "draft"}


def test_an_external_charge_preview_names_the_endpoint_by_reference_and_its_approvals() -> None:
    charge = registry().resolve("payment.charge_card", "latest")
    shown = preview(stage_record(charge, dry_run=True, required_approvals=2), charge, "k")
    [effect] = shown["effects"]
    assert effect == {"kind": "http", "operation": "POST", "target": "demo_provider/v1/charges", "external": True}
    assert shown["impact"]["approvals_required"] == 2
    assert shown["impact"]["approver_groups"] == ["finance-controllers", "finance-directors"]
    assert shown["impact"]["budget_dimensions"] == ["critical_mutation", "financial"]
    assert shown["impact"]["reversible"] is False
    assert "125000" in shown["consequence"]
    assert "secret" not in json.dumps(shown).lower()  # the auth profile's secret ref is never shown


def test_every_shipped_contract_previews() -> None:
    for contract in registry():
        assert effects(contract), contract.name
        assert preview(stage_record(contract, dry_run=True), contract, None)["would_execute"]["tool"] == contract.name
