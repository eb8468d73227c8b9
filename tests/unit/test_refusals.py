"""Refusals of records that prove nobody, collapsed into counts (workers/runtime/refusals.py): the
first few of a kind in a window audited one row each, the rest counted into one row when the
window closes, a bounded number of rows per window whatever the flood."""

from __future__ import annotations

import pytest

from tests.unit.test_house import test_a_decision_imports_no_io
from toolgate.store.audit_entry import MAX_AUDITED, Entry, bounded
from toolgate.workers.runtime.refusals import COLLAPSED, INDIVIDUALLY, SAMPLES, Refusal, Tally

WINDOW_MS = 60_000


def forged(n: int, stage: str = "policy", source: str = "validated") -> Refusal:
    detail = {"topic": source, "partition": 0, "offset": n, "bytes": 10}
    return Refusal(Entry(stage, "forged_record", "unknown", f"call_{n}", None, detail), source)


def undecodable(n: int) -> Refusal:
    return Refusal(
        Entry("validation", "refused", "unknown", f"call_{n}", None, {"code": "undecodable_proposal"}), "proposals"
    )


def test_a_few_are_audited_one_row_each_at_once() -> None:
    tally = Tally(WINDOW_MS)
    written = tally.admit([forged(n) for n in range(3)], now_ms=1_000)
    assert [e.call_id for e in written] == ["call_0", "call_1", "call_2"]
    assert tally.due(now_ms=1_000 + WINDOW_MS) == []  # nothing was counted: no collapsed row


def test_a_flood_writes_a_bounded_number_of_rows_per_window_and_counts_the_rest() -> None:
    tally = Tally(WINDOW_MS)
    written, sent = [], []
    for at in range(0, 10_000, 10):  # 1,000 rounds of 7 forged records in one window
        sent += [forged(n) for n in range(at, at + 7)]
        written += tally.admit(sent[-7:], now_ms=at)
    assert written == [r.entry for r in sent[:INDIVIDUALLY]]
    assert tally.due(now_ms=WINDOW_MS - 1) == []  # still open
    (collapsed,) = tally.due(now_ms=WINDOW_MS)
    assert (collapsed.stage, collapsed.action, collapsed.actor, collapsed.call_id) == (
        "policy",
        COLLAPSED,
        "toolgate",
        None,
    )
    d = collapsed.detail
    assert (d["action"], d["code"], d["source"], d["seen"], d["collapsed"]) == (
        "forged_record",
        "",
        "validated",
        7_000,
        7_000 - INDIVIDUALLY,
    )
    assert (d["first_at_ms"], d["last_at_ms"], d["proven"]) == (0, 9_990, False)
    samples = sent[INDIVIDUALLY : INDIVIDUALLY + SAMPLES]
    assert [s["call_id"] for s in d["samples"]] == [r.entry.call_id for r in samples]
    assert tally.open_windows() == 0
    # The next one opens a new window, audited at once again.
    assert [e.call_id for e in tally.admit([forged(1)], now_ms=WINDOW_MS + 5)] == ["call_1"]


def test_each_stage_action_code_and_source_has_its_own_window() -> None:
    tally = Tally(WINDOW_MS)
    flood = [forged(n) for n in range(20)] + [undecodable(n) for n in range(20)]
    flood += [forged(n, source="authorized") for n in range(20)] + [forged(n, stage="execution") for n in range(20)]
    assert len(tally.admit(flood, now_ms=0)) == 4 * INDIVIDUALLY
    assert len(tally.drain()) == 4 and tally.open_windows() == 0


def test_windows_that_closed_are_audited_with_the_next_refusals() -> None:
    tally = Tally(WINDOW_MS)
    tally.admit([forged(n) for n in range(INDIVIDUALLY + 1)], now_ms=0)
    written = tally.admit([undecodable(1)], now_ms=WINDOW_MS)
    assert [e.action for e in written] == [COLLAPSED, "refused"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, None), ("", ""), ("call_1", "call_1"), ("x" * MAX_AUDITED, "x" * MAX_AUDITED), ("x" * 400_000, None)],
)
def test_a_value_from_an_unproven_record_is_audited_only_within_its_bound(
    value: str | None, expected: str | None
) -> None:
    assert bounded(value) == expected


@pytest.mark.parametrize("module", ["toolgate.workers.runtime.refusals", "toolgate.store.audit_entry"])
def test_the_tally_and_the_entry_are_pure(module: str) -> None:
    test_a_decision_imports_no_io(module)
