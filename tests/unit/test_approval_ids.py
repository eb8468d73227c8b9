"""An approval id is typed back as any unique start of it (ops/approvals.py `resolved`, looked
up by store/open_approvals.py's escaped LIKE prefix), and the tables it is copied from never cut
it (ops/tables.py), at any terminal width."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console

from toolgate.ops.approvals import CANDIDATES, Unresolved, print_list, resolved
from toolgate.store.open_approvals import like_prefix

ID = "appr_a4f2bb3c0d1e2f3a4b5c6d7e"
OTHER = "appr_a4f2bb3cffffffffffffffff"


@pytest.mark.parametrize(
    ("typed", "pattern"),
    [
        ("appr_a4f2", "appr\\_a4f2%"),
        ("appr_%", "appr\\_\\%%"),
        ("100%_off", "100\\%\\_off%"),
        ("back\\slash", "back\\\\slash%"),
        ("", "%"),
        ("plain", "plain%"),
    ],
)
def test_like_prefix_makes_what_was_typed_literal(typed: str, pattern: str) -> None:
    assert like_prefix(typed) == pattern


@pytest.mark.parametrize(
    ("typed", "matches", "expected"),
    [
        ("appr_a4f2bb3c0", [ID], ID),  # a unique prefix: the full id
        (ID, [ID], ID),  # the whole id
        (ID[:-1], [ID[:-1] + "x", ID], None),  # several: refused
        ("appr_a4f2bb3c", [ID, OTHER], None),
        (ID, [ID, ID + "0"], ID),  # a whole id is itself even where a longer one starts with it
    ],
)
def test_resolved(typed: str, matches: list[str], expected: str | None) -> None:
    if expected is None:
        with pytest.raises(Unresolved) as refused:
            resolved(typed, matches)
        assert all(m in str(refused.value) for m in matches)  # the candidates are named
        assert "several" in str(refused.value)
    else:
        assert resolved(typed, matches) == expected


@pytest.mark.parametrize("typed", ["appr_zzz", ""])
def test_resolved_names_none_as_before(typed: str) -> None:
    with pytest.raises(Unresolved, match=f"^no approval {typed}$"):
        resolved(typed, [] if typed else [ID])


def test_resolved_says_when_there_may_be_more_candidates() -> None:
    many = [f"{ID[:-2]}{i:02d}" for i in range(CANDIDATES)]
    with pytest.raises(Unresolved, match=r"\.\.\.; type more"):
        resolved(ID[:-2], many)


def row(approval_id: str, tenant: str = "acme-industries") -> dict[str, Any]:
    return {
        "approval_id": approval_id,
        "status": "PENDING",
        "tool": "payments.create_charge",
        "version": "1.2.0",
        "risk_class": "HIGH_RISK_EXTERNAL",
        "tenant": tenant,
        "approved": 1,
        "required": 2,
        "expires_at": "2026-11-30T12:00:00.000Z",
    }


def listed(rows: list[dict[str, Any]], width: int) -> str:
    out = io.StringIO()
    print_list(rows, Console(file=out, width=width))
    return out.getvalue()


@pytest.mark.parametrize("width", [70, 80, 100, 200])
def test_the_approvals_table_never_cuts_an_id(width: int) -> None:
    text = listed([row(ID), row(OTHER, tenant="t")], width)
    lines = text.splitlines()
    assert "…" not in text
    assert "────" in text  # a table
    assert any(ID in line for line in lines) and any(OTHER in line for line in lines)
    assert max(len(line) for line in lines) <= width


@pytest.mark.parametrize("width", [20, 60])
def test_a_terminal_too_narrow_for_the_table_gets_each_row_on_one_line(width: int) -> None:
    text = listed([row(ID), row(OTHER, tenant="t")], width)
    assert "…" not in text
    lines = text.splitlines()
    assert lines[1].startswith(ID) and lines[2].startswith(OTHER)
    assert lines[1].endswith("acme-industries  1/2  2026-11-30T12:00:00.000Z")
