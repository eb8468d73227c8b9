"""The target state an approval binds: the before-state row, versioned by its hash."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from tests.unit.factories import registry, stage_record
from toolgate.workers.runtime import target_state

CHARGE = registry().get("payment.charge_card", "1.0.0")
EMAIL = registry().get("notify.send_email", "1.0.0")
LOOKUP = CHARGE.binding["confirmation"]["before_state"]["lookup"]
ROW = {"id": "inv_acme0002", "tenant_id": "acme", "status": "open", "currency": "USD", "amount_cents": 125000}


def rows(**changes: object) -> dict[tuple[str, str], tuple[dict[str, object], ...]]:
    return {(LOOKUP, "inv_acme0002"): ({**ROW, **changes},)}


def test_the_charge_binds_its_invoice_and_the_email_binds_nothing() -> None:
    record = stage_record(CHARGE)
    assert target_state.refs(record, CHARGE) == [(LOOKUP, "inv_acme0002")]
    assert target_state.bound_version(stage_record(EMAIL), EMAIL, {}) is None


def test_the_version_is_stable_and_moves_with_any_column() -> None:
    record = stage_record(CHARGE)
    version = target_state.bound_version(record, CHARGE, rows())
    assert version is not None and version.startswith("sha256:")
    assert target_state.bound_version(record, CHARGE, rows()) == version
    assert target_state.bound_version(record, CHARGE, rows(status="paid")) != version
    assert target_state.bound_version(record, CHARGE, rows(amount_cents=1)) != version


def test_a_missing_or_foreign_target_is_absent() -> None:
    record = stage_record(CHARGE)
    assert target_state.bound_version(record, CHARGE, {}) == target_state.ABSENT
    assert target_state.bound_version(record, CHARGE, rows(tenant_id="globex")) == target_state.ABSENT


def test_the_card_shows_the_row_without_its_keys_and_database_types_become_json() -> None:
    row = {**ROW, "amount_cents": Decimal(125000), "due_date": dt.date(2026, 12, 15)}
    assert target_state.shown(row) == {
        "status": "open",
        "currency": "USD",
        "amount_cents": "125000",
        "due_date": "2026-12-15",
    }
    assert target_state.version(row) == target_state.version(dict(reversed(list(row.items()))))
