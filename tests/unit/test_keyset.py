"""The deployment's keyset, pure: which key seals, which are accepted at a time, the steps of a
rotation, and the document a secret reference holds."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

from tests.unit.test_house import clock_reads
from toolgate.trust.keyset import (
    HEADER,
    KeyEntry,
    Keyset,
    KeysetError,
    KeyState,
    Step,
    iso,
    parse,
    promote,
    render,
    retire,
    stage,
)

OLD, NEW, NEWER = "old-secret-of-some-length", "new-secret-of-some-length", "newer-secret-of-some-length"
PUBLIC = "ab" * 32
T0 = 1_800_000_000_000  # ms
GRACE = 60_000


def secrets_of(entries: tuple[KeyEntry, ...]) -> list[str]:
    return [e.secret for e in entries]


def test_a_bare_secret_is_a_keyset_whose_only_key_is_current() -> None:
    keyset = parse(f"  {OLD}\n")
    assert keyset.current.secret == OLD and keyset.next is None and keyset.previous is None
    assert secrets_of(keyset.accepted(T0)) == [OLD]
    assert keyset.step() is Step.STAGE


def test_a_full_rotation_moves_each_key_one_state_on() -> None:
    """stage -> promote -> retire: which key seals and which are accepted, at each step."""
    start = parse(OLD)
    staged = stage(start, NEW)
    assert staged.current.secret == OLD  # the new key seals nowhere yet...
    assert secrets_of(staged.accepted(T0)) == [OLD, NEW]  # ...but is accepted everywhere
    assert staged.step() is Step.PROMOTE

    promoted = promote(staged, T0, GRACE)
    assert promoted.current.secret == NEW  # the new key seals
    assert promoted.previous == KeyEntry(KeyState.PREVIOUS, OLD, until_ms=T0 + GRACE)
    assert secrets_of(promoted.accepted(T0 + GRACE - 1)) == [NEW, OLD]  # the old one for the grace
    assert secrets_of(promoted.accepted(T0 + GRACE)) == [NEW]  # and not a moment after
    assert promoted.step() is Step.RETIRE

    retired = retire(promoted, T0 + GRACE, PUBLIC)
    assert secrets_of(retired.accepted(T0 + GRACE)) == [NEW]
    assert retired.retired == (KeyEntry(KeyState.RETIRED, public_key=PUBLIC),)
    assert OLD not in render(retired)  # the secret is gone; its public half stays
    assert retired.step() is Step.STAGE

    again = retire(promote(stage(retired, NEWER), T0 + 2 * GRACE, GRACE), T0 + 3 * GRACE, "cd" * 32)
    assert again.current.secret == NEWER and [e.public_key for e in again.retired] == [PUBLIC, "cd" * 32]


@pytest.mark.parametrize(
    ("keyset", "step", "refused"),
    [
        (stage(parse(OLD), NEW), lambda k: stage(k, NEWER), "its next step is promote"),
        (promote(stage(parse(OLD), NEW), T0, GRACE), lambda k: stage(k, NEWER), "its next step is retire"),
        (parse(OLD), lambda k: promote(k, T0, GRACE), "no key is staged"),
        (parse(OLD), lambda k: retire(k, T0, PUBLIC), "no previous key"),
        (promote(stage(parse(OLD), NEW), T0, GRACE), lambda k: retire(k, T0 + GRACE - 1, PUBLIC), "accepted until"),
        (parse(OLD), lambda k: stage(k, OLD), "each secret once"),
        (parse(OLD), lambda k: stage(k, "short"), "at least 16 bytes"),
        (stage(parse(OLD), NEW), lambda k: promote(k, T0, -1), "not negative"),
    ],
)
def test_a_step_out_of_order_is_refused(keyset: Keyset, step: object, refused: str) -> None:
    with pytest.raises(KeysetError, match=refused):
        step(keyset)  # type: ignore[operator]


def test_retiring_early_is_an_explicit_choice() -> None:
    promoted = promote(stage(parse(OLD), NEW), T0, GRACE)
    assert secrets_of(retire(promoted, T0, PUBLIC, early=True).accepted(T0)) == [NEW]


def test_the_document_reads_back_as_written() -> None:
    keyset = promote(stage(retire(promote(stage(parse(OLD), NEW), T0, 0), T0, PUBLIC), NEWER), T0 + 1234, GRACE)
    text = render(keyset)
    assert text.splitlines() == [
        HEADER,
        f"current {NEWER}",
        f"previous {NEW} {iso(T0 + 1234 + GRACE)}",
        f"retired {PUBLIC}",
    ]
    assert set(parse(text).entries) == set(keyset.entries)


@pytest.mark.parametrize(
    "text",
    [
        f"{HEADER}\nnext {NEW}\n",  # no current key
        f"{HEADER}\ncurrent {OLD}\ncurrent {NEW}\n",
        f"{HEADER}\ncurrent {OLD}\nnext {NEW}\nnext {NEWER}\n",
        f"{HEADER}\ncurrent {OLD}\nprevious {NEW}\n",  # a previous key without its end
        f"{HEADER}\ncurrent {OLD}\nprevious {NEW} yesterday\n",
        f"{HEADER}\ncurrent {OLD}\nprevious {NEW} 2026-11-28T10:00:00\n",  # no zone
        f"{HEADER}\ncurrent {OLD}\nretired {NEW}\n",  # a retired key is a public key
        f"{HEADER}\ncurrent {OLD}\nspare {NEW}\n",
        f"{HEADER}\ncurrent {OLD} {NEW}\n",
        f"{HEADER}\ncurrent short\n",
        "short",
    ],
)
def test_a_keyset_that_is_not_one_is_refused_without_quoting_it(text: str) -> None:
    with pytest.raises(KeysetError) as refused:
        parse(text)
    assert OLD not in str(refused.value) and NEW not in str(refused.value) and NEWER not in str(refused.value)


def test_a_bare_secret_with_spaces_still_reads_but_is_not_written_into_lines() -> None:
    keyset = parse("an old secret with spaces in it")
    assert keyset.current.secret == "an old secret with spaces in it"
    with pytest.raises(KeysetError, match="holds spaces"):
        render(stage(keyset, NEW))


def test_the_keyset_reads_no_clock_and_no_randomness() -> None:
    spec = importlib.util.find_spec("toolgate.trust.keyset")
    assert spec is not None and spec.origin is not None
    assert clock_reads(ast.parse(Path(spec.origin).read_text())) == []
