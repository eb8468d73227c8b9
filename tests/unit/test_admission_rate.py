"""Each agent's validation work (workers/validation/admission_rate.py): a budget refilled at a
steady rate, charged after each call, refused while in debt with the time until it is not.
Table-driven, the time passed in."""

from __future__ import annotations

import pytest

from toolgate.workers.validation import admission_rate
from toolgate.workers.validation.admission_rate import AdmissionRate, cost

CLI, OTHER = ("acme", "cli"), ("globex", "globex-cli")


def test_what_a_call_costs() -> None:
    assert cost(150, 0) == 2  # an ordinary call
    assert cost(240 * 1024, 2) == 1 + 1920 + 2  # the review's 240 KiB refusal, sizes checked first
    assert cost(0, 2048) == 2049  # a refusal that spent its whole schema budget


def test_an_agent_spends_its_burst_goes_into_debt_and_waits_it_out() -> None:
    rate = AdmissionRate(per_second=1000.0, burst=5000.0)
    assert rate.retry_after_ms(CLI, 0) is None
    rate.charge(CLI, 3000, 0)
    rate.charge(CLI, 3000, 0)  # one call may overdraw: its cost is known only once decided
    assert rate.retry_after_ms(CLI, 0) == 1000  # 1,000 units in debt at 1 a millisecond
    assert rate.retry_after_ms(CLI, 600) == 400
    assert rate.retry_after_ms(CLI, 1000) is None
    assert rate.retry_after_ms(OTHER, 0) is None  # another agent's budget is its own


def test_a_refilled_agent_is_forgotten_and_the_refill_stops_at_the_burst() -> None:
    rate = AdmissionRate(per_second=1000.0, burst=5000.0)
    rate.charge(CLI, 4000, 0)
    assert CLI in rate.balances
    rate.charge(CLI, 1, 10_000)  # long since refilled to the burst, not beyond it
    assert rate.balances[CLI].units == 4999
    rate.charge(CLI, 0, 20_000)
    assert CLI not in rate.balances


def test_the_table_of_agents_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(admission_rate, "MAX_AGENTS", 3)
    rate = AdmissionRate(per_second=1.0, burst=10.0)
    for i in range(5):
        rate.charge(("acme", f"a{i}"), 100, i)
    assert len(rate.balances) == 3
    assert set(rate.balances) == {("acme", "a2"), ("acme", "a3"), ("acme", "a4")}  # the longest quiet went


@pytest.mark.parametrize(("per_second", "burst"), [(0.0, 10.0), (10.0, 0.0), (-1.0, 10.0)])
def test_a_rate_must_be_positive(per_second: float, burst: float) -> None:
    with pytest.raises(ValueError, match="positive"):
        AdmissionRate(per_second, burst)
