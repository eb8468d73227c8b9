"""The hash-chained audit log (store/audit.py): chain_hash and verify_rows."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.unit.factories import FAST_FEW
from toolgate.store.audit import GENESIS, Entry, chain_hash, verify_rows

Row = tuple[Any, ...]
SAFE_INT = st.integers(-(2**53) + 1, 2**53 - 1)  # RFC 8785 refuses integers beyond IEEE 754 doubles


def chain(entries: list[tuple[str, Entry]], first_id: int = 1) -> list[Row]:
    rows: list[Row] = []
    prev = GENESIS
    for i, (at, e) in enumerate(entries):
        digest = chain_hash(prev, at, e)
        rows.append((first_id + i, at, e.stage, e.action, e.actor, e.call_id, e.tenant_id, e.detail, prev, digest))
        prev = digest
    return rows


ENTRIES = [
    ("2024-01-01T00:00:00.000001Z", Entry("validation", "pass", "worker-1", "call_1", "acme", {"taxonomy": None})),
    ("2024-01-01T00:00:00.000002Z", Entry("policy", "allow", "worker-2", "call_1", "acme", {"approvals": 2})),
    ("2024-01-01T00:00:00.000003Z", Entry("approval", "approve", "alice", "call_1", "acme", {"n": [1, 2]})),
    ("2024-01-01T00:00:00.000004Z", Entry("execution", "done", "worker-3", None, None, {})),
    ("2024-01-01T00:00:00.000005Z", Entry("ops", "replay", "operator", "call_9", "globex", {"why": "é✓"})),
]
ROWS = chain(ENTRIES)


def edit(row: Row, index: int, value: Any) -> Row:
    return (*row[:index], value, *row[index + 1 :])


def test_intact_chain_verifies() -> None:
    assert verify_rows(ROWS) == (len(ROWS), None)
    assert verify_rows([]) == (0, None)


def test_first_row_links_to_genesis() -> None:
    assert ROWS[0][8] == GENESIS == "0" * 64
    assert all(ROWS[i][8] == ROWS[i - 1][9] for i in range(1, len(ROWS)))


def test_chain_hash_depends_on_every_part() -> None:
    at, e = ENTRIES[0]
    base = chain_hash(GENESIS, at, e)
    variants = [
        chain_hash("1" * 64, at, e),
        chain_hash(GENESIS, at + "x", e),
        chain_hash(GENESIS, at, Entry("x", e.action, e.actor, e.call_id, e.tenant_id, e.detail)),
        chain_hash(GENESIS, at, Entry(e.stage, "x", e.actor, e.call_id, e.tenant_id, e.detail)),
        chain_hash(GENESIS, at, Entry(e.stage, e.action, "x", e.call_id, e.tenant_id, e.detail)),
        chain_hash(GENESIS, at, Entry(e.stage, e.action, e.actor, None, e.tenant_id, e.detail)),
        chain_hash(GENESIS, at, Entry(e.stage, e.action, e.actor, e.call_id, "x", e.detail)),
        chain_hash(GENESIS, at, Entry(e.stage, e.action, e.actor, e.call_id, e.tenant_id, {"taxonomy": "X"})),
    ]
    assert base not in variants and len(set(variants)) == len(variants)
    assert len(base) == 64


def test_detail_key_order_does_not_matter() -> None:
    at, _ = ENTRIES[0]
    a = Entry("s", "a", "x", detail={"a": 1, "b": 2})
    b = Entry("s", "a", "x", detail={"b": 2, "a": 1})
    assert chain_hash(GENESIS, at, a) == chain_hash(GENESIS, at, b)


# A row: id, at, stage, action, actor, call_id, tenant_id, detail, prev_hash, hash
EDITS = {
    1: "2024-01-01T00:00:00.999999Z",
    2: "other-stage",
    3: "other-action",
    4: "mallory",
    5: "call_other",
    6: "tenant_other",
    7: {"tampered": True},
    8: "f" * 64,
    9: "e" * 64,
}


@pytest.mark.parametrize("index", sorted(EDITS))
@pytest.mark.parametrize("position", [0, 2, 4])
def test_modified_row_detected(index: int, position: int) -> None:
    rows = list(ROWS)
    rows[position] = edit(rows[position], index, EDITS[index])
    assert verify_rows(rows) == (position, rows[position][0])


@pytest.mark.parametrize("position", range(len(ROWS) - 1))
def test_removed_row_detected(position: int) -> None:
    rows = ROWS[:position] + ROWS[position + 1 :]
    checked, broken = verify_rows(rows)
    assert broken == ROWS[position + 1][0] and checked == position


@pytest.mark.parametrize("position", range(len(ROWS) - 1))
def test_swapped_rows_detected(position: int) -> None:
    rows = list(ROWS)
    rows[position], rows[position + 1] = rows[position + 1], rows[position]
    checked, broken = verify_rows(rows)
    assert broken is not None and checked == position


def test_reordered_with_rehashed_ids_detected() -> None:
    """Renumbering ids after a reorder does not help: the chain, not the id, fixes the order."""
    moved = [ROWS[1], ROWS[0], *ROWS[2:]]
    renumbered = [(i + 1, *row[1:]) for i, row in enumerate(moved)]
    assert verify_rows(renumbered)[1] == 1


def test_rewriting_a_row_and_its_hash_breaks_the_next() -> None:
    rows = list(ROWS)
    at, e = ENTRIES[1]
    forged = Entry(e.stage, "deny", e.actor, e.call_id, e.tenant_id, e.detail)
    rows[1] = (*rows[1][:3], "deny", *rows[1][4:9], chain_hash(rows[1][8], at, forged))
    assert verify_rows(rows) == (2, ROWS[2][0])


def test_removing_the_last_row_is_not_detectable_by_the_chain_alone() -> None:
    """Documented limit of an unanchored hash chain: truncation at the end still verifies."""
    assert verify_rows(ROWS[:-1]) == (len(ROWS) - 1, None)


@FAST_FEW
@given(
    details=st.lists(
        st.dictionaries(st.text(max_size=5), SAFE_INT | st.text(max_size=5), max_size=3), min_size=2, max_size=6
    ),
    data=st.data(),
)
def test_any_single_detail_edit_detected(details: list[dict[str, Any]], data: st.DataObject) -> None:
    rows = chain([(f"t{i}", Entry("s", "a", "x", None, None, d)) for i, d in enumerate(details)])
    assert verify_rows(rows) == (len(rows), None)
    position = data.draw(st.integers(0, len(rows) - 1))
    rows[position] = edit(rows[position], 7, {**rows[position][7], "\x00tamper": 1})
    assert verify_rows(rows) == (position, rows[position][0])
