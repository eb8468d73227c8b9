"""Approve with edit in the console (issue 52, part 3): the approver's edit, typed on the card as
a JSON object, made into the edited arguments a decision carries, and a signed decision's edited
arguments checked again before the console publishes it. Pure. The merge, the narrowing rule and
the canonical text are contracts/edits.py's, exactly as `toolgate approvals approve --edit` uses
them; approval-wait checks every edit again (workers/approval/edited.py). The difference, as the
card shows it, is console/views.py's `diff_rows`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from toolgate.contracts.contract import Contract
from toolgate.contracts.edits import Change, EditRefused, diff, edited_text
from toolgate.refusal import Refusal

EDIT_MAX = 32 * 1024  # characters of a typed edit: the console's requests are at most 64 KiB


@dataclass(frozen=True)
class Prepared:
    """An edit that only narrows: the edited arguments' canonical JSON (what the approver signs)
    and what it changes."""

    edited_arguments: str
    changes: list[Change]


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def edit_object(text: str) -> dict[str, Any]:
    """The typed edit: a JSON object of the arguments it changes (or all of them, changed or
    not). Raises EditRefused (edit_not_an_object) for anything else."""
    if len(text) > EDIT_MAX:
        raise EditRefused(Refusal("edit_not_an_object", f"an edit is at most {EDIT_MAX} characters"))
    try:
        edit = json.loads(text, parse_constant=_no_constant)
    except ValueError as exc:
        raise EditRefused(Refusal("edit_not_an_object", f"the edit is not JSON: {exc}")) from exc
    if not isinstance(edit, dict):
        raise EditRefused(Refusal("edit_not_an_object", "an edit is a JSON object of the arguments it changes"))
    return edit


def prepared(held: Mapping[str, Any], text: str, contract: Contract) -> Prepared:
    """The edited arguments of the typed edit over the held call's, and their difference; raises
    EditRefused, before anything is signed, for an edit that is not an object, changes nothing,
    fails the contract's input schema or widens what the held call spends."""
    after = edited_text(held, edit_object(text), contract)
    return Prepared(after, diff(held, json.loads(after)))


def signed_edit_refusal(held: Mapping[str, Any], edited_arguments: str, contract: Contract) -> Refusal | None:
    """Why a signed decision's edited arguments are not what `prepared` gives for them (None: they
    are): not a JSON object, not the held arguments merged with an edit that only narrows, or not
    in canonical JSON."""
    try:
        after = json.loads(edited_arguments)
    except ValueError:
        return Refusal("edit_not_an_object", "the edited arguments are not JSON")
    try:
        again = edited_text(held, after, contract)
    except EditRefused as exc:
        return Refusal(exc.code, exc.reason)
    if again != edited_arguments:
        return Refusal("edit_not_canonical", "the edited arguments are not the held call's, merged and canonical")
    return None
