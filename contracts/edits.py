"""Approve with edit (issue 52, part 3): what an approver's edit makes of a held call's
arguments, the difference it makes, and whether it only narrows. Pure: the CLI, the client
library, the console and approval-wait call the same functions.

An edit is a JSON object merged over the held call's arguments, key by key at the top level: a
key the edit names replaces the argument's value whole (an object included), a key it leaves out
keeps the held value. An edit cannot remove an argument. The merged object is what the approver
signs (`ApprovalDecision.edited_arguments`, canonical JSON) and what goes back through
validation and policy as the edited call.

An edit may only narrow what the held call asked for:

    the edit                                              refused with
    changes nothing                                       edit_unchanged
    is not a JSON object, or the merge is not one         edit_not_an_object
    fails the contract's input schema                     edit_invalid
    spends more of a value the contract declares spent    edit_widens_value
      (contracts/values.py: money by currency, recipients)
    spends a value dimension the held call did not spend  edit_widens_value
    needs more approvals under policy than the held call  edit_needs_more_approvals
      (judged when the edited call comes back from policy: workers/approval/edited_holds.py)

Everything else the edited call is (its tool, its tenant, its target's facts) is judged again by
validation and policy as for any call: an edit they refuse ends the call refused, nothing runs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from toolgate.contracts.contract import Contract
from toolgate.contracts.values import spent_values
from toolgate.refusal import Refusal
from toolgate.schemas.hashing import payload_hash
from toolgate.schemas.models import ApprovalDecision
from toolgate.schemas.wire import canonical_json


@dataclass(frozen=True)
class Change:
    """One argument the edit changed: its path (top-level name, then `.key` or `[i]`), its value
    before and after (None where it was or is absent)."""

    field: str
    before: Any
    after: Any

    def as_json(self) -> dict[str, Any]:
        return {"field": self.field, "before": self.before, "after": self.after}


@dataclass(frozen=True)
class Edited:
    """An edit that only narrows: the edited arguments and what it changed."""

    arguments: dict[str, Any]
    changes: list[Change]


def merged(arguments: Mapping[str, Any], edit: Any) -> dict[str, Any] | Refusal:
    """The edited arguments: `edit`'s keys over `arguments`' (the module docstring's rule)."""
    if not isinstance(edit, Mapping):
        return Refusal("edit_not_an_object", "an edit is a JSON object of the arguments it changes")
    return {**arguments, **edit}


def diff(before: Any, after: Any, path: str = "") -> list[Change]:
    """Every leaf value that differs, in a stable order (objects by key, lists by index)."""
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        changes: list[Change] = []
        for key in sorted(set(before) | set(after)):
            where = f"{path}.{key}" if path else str(key)
            changes += diff(before.get(key), after.get(key), where)
        return changes
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return [c for i, (b, a) in enumerate(zip(before, after, strict=True)) for c in diff(b, a, f"{path}[{i}]")]
    if before == after and type(before) is type(after):
        return []
    return [Change(path, before, after)]


def widening(contract: Contract, before: Mapping[str, Any], after: Mapping[str, Any]) -> Refusal | None:
    """Why the edit from `before` to `after` does not only narrow (None: it narrows)."""
    if not diff(before, after):
        return Refusal("edit_unchanged", "the edit changes nothing: approve the call as it is instead")
    violation = contract.input_violation(dict(after))
    if violation is not None:
        return Refusal(
            "edit_invalid",
            f"the edited arguments fail the contract's input schema: {getattr(violation, 'message', violation)}",
        )
    spent_before, spent_after = spent_values(contract, before), spent_values(contract, after)
    for dimension, amount in sorted(spent_after.items()):
        held = spent_before.get(dimension)
        if held is None:
            return Refusal("edit_widens_value", f"the edit spends {dimension}, which the held call did not spend")
        if amount > held:
            return Refusal(
                "edit_widens_value", f"the edit spends {amount} of {dimension}, more than the held call's {held}"
            )
    return None


def more_approvals(held_required: int, edited_required: int) -> Refusal | None:
    """Policy's verdict on the edited call may not ask for more approvals than the held call's."""
    if edited_required <= held_required:
        return None
    return Refusal(
        "edit_needs_more_approvals",
        f"policy asks {edited_required} approvals of the edited call, more than the held call's {held_required}",
    )


class EditRefused(ValueError):
    """An edit refused before it was signed: `code` is one of the module docstring's."""

    def __init__(self, widens: Refusal) -> None:
        super().__init__(f"{widens.code}: {widens.reason}")
        self.code = widens.code
        self.reason = widens.reason


# The warning an edited call's observation carries: this prefix, then canonical JSON of
# {"approval_id", "edited_by", "diff": [{"field", "before", "after"}, ...]}.
NOTE_PREFIX = "edited: "


def note(approval_id: str, edited_by: str, changes: list[Change]) -> str:
    """The edited call's warning: who edited it, on which approval, and the argument diff."""
    body = {"approval_id": approval_id, "edited_by": edited_by, "diff": [c.as_json() for c in changes]}
    return NOTE_PREFIX + json.dumps(body, sort_keys=True, separators=(",", ":"))


def read_note(warnings: list[str]) -> dict[str, Any] | None:
    """The edit an observation's warnings report, or None: the call was not edited."""
    for warning in warnings:
        if warning.startswith(NOTE_PREFIX):
            found: dict[str, Any] = json.loads(warning[len(NOTE_PREFIX) :])
            return found
    return None


def edited_text(held: Mapping[str, Any], edit: Any, contract: Contract | None = None) -> str:
    """What an approver signs for `edit` of the held arguments: the merged object's canonical
    JSON. Raises EditRefused, before anything is signed, for an edit that is not an object or
    changes nothing, and (given the call's contract) for one that does not only narrow."""
    after = merged(held, edit)
    if isinstance(after, Refusal):
        raise EditRefused(after)
    widens = widening(contract, held, after) if contract is not None else None
    if widens is None and not diff(held, after):
        widens = Refusal("edit_unchanged", "the edit changes nothing: approve the call as it is instead")
    if widens is not None:
        raise EditRefused(widens)
    return canonical_json(after)


def edited_hash(decision: ApprovalDecision) -> str:
    """The payload hash of an edit decision's arguments (canonical JSON, as signed): what
    approval-wait records on the ticket it closes EDITED, and validation holds a re-entry to."""
    return payload_hash(json.loads(decision.edited_arguments or "{}"))
