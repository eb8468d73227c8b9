"""Retention's ages (workers/reconciliation/retention.py): the configured windows, never below
what a reader of the table needs. No I/O; the deletes are tested on Postgres in
tests/integration/test_retention.py."""

from __future__ import annotations

import pytest

from tests.unit.factories import registry
from toolgate.contracts.budgets import admit, load_budgets
from toolgate.settings import Settings
from toolgate.workers.reconciliation.pruner import needs_of
from toolgate.workers.reconciliation.retention import DAY_S, Needs, ages

NEEDS = Needs(proposal_window_s=960.0, dedupe_window_s=86_400.0, rate_window_s=60.0, deadletter_retention_s=30 * DAY_S)


def test_the_configured_window_applies_where_it_is_above_every_floor() -> None:
    got = ages(45, 400, NEEDS)
    assert got.calls == got.repair_attempts == got.approvals == got.usage_events == 45 * DAY_S
    assert got.expired_keys == 45 * DAY_S
    assert got.key_tombstones == 400 * DAY_S
    assert got.dead_letter_actions == 45 * DAY_S
    assert got.usage_daily_days == 45
    assert got.raised == ()


@pytest.mark.parametrize(
    ("table", "floor"),
    [
        ("calls", 960.0),
        ("repair_attempts", 960.0),
        ("approvals", 960.0),
        ("usage_events", 86_400.0),
        ("expired_keys", 86_400.0),
        ("dead_letter_actions", 30 * DAY_S),
    ],
)
def test_a_window_below_what_a_reader_needs_is_raised_and_said(table: str, floor: float) -> None:
    got = ages(0.001, 0, NEEDS)
    assert getattr(got, table) == floor
    assert any(reason.startswith(table.replace("expired_keys", "idempotency_keys")) for reason in got.raised)


def test_usage_events_outlive_the_longest_rate_window_too() -> None:
    wide = Needs(960.0, 3600.0, 7 * DAY_S, 0.0)
    assert ages(1, 1, wide).usage_events == 7 * DAY_S


def test_todays_and_yesterdays_daily_counters_are_never_pruned() -> None:
    assert ages(0.001, 0, NEEDS).usage_daily_days == 2
    assert ages(1, 0, NEEDS).usage_daily_days == 2
    assert ages(3.5, 0, NEEDS).usage_daily_days == 3


def test_refused_expired_keys_are_kept_at_least_as_long_as_the_others() -> None:
    assert ages(60, 10, NEEDS).key_tombstones == 60 * DAY_S


def test_needs_come_from_the_contracts_the_policy_grants_and_the_catalog() -> None:
    settings = Settings(proposal_max_age_seconds=900, proposal_future_skew_seconds=60)
    shipped = needs_of(registry(), load_budgets(), settings)
    assert shipped.proposal_window_s == 960
    assert shipped.dedupe_window_s == max(c.idempotency_ttl_seconds for c in registry())
    assert shipped.deadletter_retention_s == 30 * DAY_S
    document = dict(load_budgets().document)
    document["rate_limits"] = {"grants": {"acme": {"invoice.fetch": {"window_sec": 9 * 86_400, "max_requests": 5}}}}
    granted = needs_of(registry(), admit(document, "test"), settings)
    assert granted.rate_window_s == 9 * 86_400
