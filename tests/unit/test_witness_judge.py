"""What a witness answers (ops/witness_judge.py), row by row of its table: and that it never
cosigns a tree that does not extend the one it cosigned."""

from __future__ import annotations

import pytest

from toolgate.ops.witness_judge import Cosign, Refuse, judge, read
from toolgate.trust.ed25519 import PrivateKey
from toolgate.trust.log_tree import CompactRange, Known
from toolgate.trust.signed_note import sign
from toolgate.trust.tlog_checkpoint import AddCheckpoint, TreeHead

ORIGIN = "toolgate/audit"
LOG, OTHER = PrivateKey(b"\x01" * 32), PrivateKey(b"\x03" * 32)
LOGS = {ORIGIN: [LOG.public]}
ROWS = [bytes([i]) * 32 for i in range(12)]
FORKED = [*ROWS[:2], b"\xff" * 32, *ROWS[3:]]  # row 2 rewritten


def request(old: int, size: int, rows: list[bytes] = ROWS, key: PrivateKey = LOG, origin: str = ORIGIN) -> str:
    known = Known(CompactRange(0).extend(rows[:old]), rows[old:size])
    note = sign(TreeHead(origin, size, known.root()).text(), origin, key)
    return AddCheckpoint(old, tuple(known.consistency()), str(note)).body()


def held(size: int, rows: list[bytes] = ROWS) -> TreeHead:
    return TreeHead(ORIGIN, size, CompactRange(0).extend(rows[:size]).root())


def answer(body: str, holding: TreeHead | None) -> Cosign | Refuse:
    parsed = read(body)
    return parsed if isinstance(parsed, Refuse) else judge(parsed, lambda origin: holding, LOGS)


@pytest.mark.parametrize(
    ("body", "holding", "status"),
    [
        ("old 0\n", None, 400),
        (request(0, 4, origin="other/log"), None, 404),
        (request(0, 4, key=OTHER), None, 403),
        (request(8, 4), held(8), 400),
        (AddCheckpoint(0, (), str(sign(TreeHead(ORIGIN, 0, bytes(32)).text(), ORIGIN, LOG))).body(), None, 400),
        (request(4, 8), None, 409),  # never cosigned: its size is 0
        (request(0, 8), held(4), 409),
        (request(6, 8), held(4), 409),
        (request(6, 6, FORKED), held(6), 409),  # same size, another root: a fork
        (request(4, 8, FORKED), held(4), 422),  # the proof is from a tree it never cosigned
        (request(6, 10, FORKED), held(6), 422),
    ],
)
def test_a_refusal(body: str, holding: TreeHead | None, status: int) -> None:
    outcome = answer(body, holding)
    assert isinstance(outcome, Refuse) and outcome.status == status, outcome


def test_a_conflict_on_the_old_size_says_the_witness_size() -> None:
    assert answer(request(6, 8), held(4)) == Refuse(409, "this witness last cosigned size 4", size=4)


@pytest.mark.parametrize(("old", "size"), [(0, 1), (0, 12), (1, 2), (4, 8), (5, 12), (7, 7), (11, 12)])
def test_a_tree_that_extends_the_cosigned_one_is_cosigned(old: int, size: int) -> None:
    outcome = answer(request(old, size), held(old) if old else None)
    assert isinstance(outcome, Cosign)
    assert outcome.head == TreeHead(ORIGIN, size, CompactRange(0).extend(ROWS[:size]).root())


def test_a_forked_proof_from_size_zero_must_be_empty() -> None:
    body = request(0, 8).replace("old 0\n", "old 0\n" + "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=\n")
    outcome = answer(body, None)
    assert isinstance(outcome, Refuse) and outcome.status == 422
