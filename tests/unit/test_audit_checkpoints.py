"""The audit log's signed checkpoints (store/audit.py): `verify`, table-driven over
every verdict, on rows built as the writer builds them."""

from __future__ import annotations

from typing import Any

import pytest

from toolgate.store.audit import (
    GENESIS,
    Checkpoint,
    Entry,
    Verdict,
    chain_hash,
    checkpoint_bytes,
    verify,
)
from toolgate.trust.ed25519 import PrivateKey

KEY = PrivateKey(b"\x01" * 32)
OTHER = PrivateKey(b"\x02" * 32)
Row = tuple[Any, ...]


def log(n: int) -> list[Row]:
    rows: list[Row] = []
    prev = GENESIS
    for i in range(n):
        at, entry = f"2024-01-01T00:00:00.{i:06d}Z", Entry("policy", "refused", "w", f"call_{i}", "acme", {"i": i})
        digest = chain_hash(prev, at, entry)
        rows.append((i + 1, at, "policy", "refused", "w", f"call_{i}", "acme", {"i": i}, prev, digest))
        prev = digest
    return rows


def signed(rows: list[Row], count: int, key: PrivateKey = KEY, checkpoint_id: int | None = None) -> Checkpoint:
    head = rows[count - 1][9]
    return Checkpoint(checkpoint_id or count, "t", count, head, key.sign(checkpoint_bytes(count, head)))


LOG = log(8)
# Checkpoints as the writer leaves them: after appends of 3, 2 and 3 rows; newest first.
HEADS = [signed(LOG, 8), signed(LOG, 5), signed(LOG, 3)]
FORGED = Checkpoint(99, "t", 10_000, "f" * 64, b"\x00" * 64)


def placed(rows: list[Row], heads: list[Checkpoint]) -> list[tuple[Checkpoint, int | None]]:
    """Each checkpoint with the position of the row holding its head, as CHECKPOINTS reads them."""
    position = {row[9]: n for n, row in enumerate(rows, start=1)}
    return [(head, position.get(head.head_hash)) for head in heads]


def check(rows: list[Row], heads: list[Checkpoint]) -> tuple[Verdict, int | None, int | None, int]:
    report = verify(iter(rows), iter(placed(rows, heads)), KEY.public)  # streamed: each read once
    return (
        report.verdict,
        report.anchor.row_count if report.anchor else None,
        report.violated.row_count if report.violated else None,
        report.unsigned,
    )


CASES = {
    "intact": (LOG, HEADS, (Verdict.INTACT, 8, None, 0)),
    "empty log, no checkpoint": ([], [], (Verdict.UNANCHORED, None, None, 0)),
    "no checkpoint yet (a log from before 0008)": (LOG, [], (Verdict.UNANCHORED, None, None, 0)),
    "rows appended after the newest checkpoint": (LOG, HEADS[1:], (Verdict.INTACT, 5, None, 0)),
    "newest rows deleted": (LOG[:6], HEADS, (Verdict.CUT, None, 8, 0)),
    "one row deleted from the end": (LOG[:7], HEADS, (Verdict.CUT, None, 8, 0)),
    "table emptied": ([], HEADS, (Verdict.CUT, None, 8, 0)),
    "a forged checkpoint is ignored": (LOG, [FORGED, *HEADS], (Verdict.INTACT, 8, None, 1)),
    "a checkpoint signed by another key is ignored": (
        LOG[:5],
        [signed(LOG, 8, OTHER), *HEADS[1:]],
        (Verdict.INTACT, 5, None, 1),
    ),
    "an edited row breaks the chain first": (
        [*LOG[:4], (*LOG[4][:3], "allowed", *LOG[4][4:]), *LOG[5:]],
        HEADS,
        (Verdict.BROKEN, 8, None, 0),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_verdicts(case: str) -> None:
    rows, heads, expected = CASES[case]
    assert check(rows, heads) == expected


def test_a_log_cut_and_regrown_is_still_cut() -> None:
    """The owner deletes rows 6-8 and the writers append three new ones: the count matches the
    newest checkpoint again, but the head it signed is gone."""
    regrown = LOG[:5]
    prev = regrown[-1][9]
    for i in range(3):
        at, entry = f"2024-01-02T00:00:00.{i:06d}Z", Entry("policy", "refused", "w")
        digest = chain_hash(prev, at, entry)
        regrown.append((6 + i, at, "policy", "refused", "w", None, None, {}, prev, digest))
        prev = digest
    newest = signed(regrown, 8, checkpoint_id=9)
    assert check(regrown, [newest, *HEADS]) == (Verdict.CUT, 8, 8, 0)  # anchored anew, yet cut


def test_a_head_at_another_position_diverges() -> None:
    moved = Checkpoint(7, "t", 6, LOG[4][9], KEY.sign(checkpoint_bytes(6, LOG[4][9])))
    assert check(LOG, [moved])[0] == Verdict.DIVERGED


def test_checkpoint_bytes_bind_count_and_head() -> None:
    head = LOG[2][9]
    assert checkpoint_bytes(3, head) != checkpoint_bytes(4, head)
    assert checkpoint_bytes(3, head) != checkpoint_bytes(3, LOG[3][9])
    assert checkpoint_bytes(12, "3") != checkpoint_bytes(1, "23")  # length-prefixed
