"""An effect in parts: what a completed effect's per-part answers make of the call.

A binding's `parts` names the result's array of parts, each answered on its own by the provider
(`ok`, and an `error` when not), and their kind (contracts/binding.schema.json):

    every part ok                               -> SUCCESS, COMPLETED
    items: some ok, some failed                 -> PARTIAL_SUCCESS, COMPLETED, an error per failed item
    steps: a step failed after one committed    -> COMPENSATION_REQUIRED, COMPLETED, naming the
                                                   compensation tool and its arguments
    no part ok                                  -> nothing happened: FAILED_RETRYABLE with
                                                   DEPENDENCY_UNAVAILABLE when every failed part
                                                   says it may be retried, else FAILED_FINAL
                                                   SEMANTIC_INVALIDITY
    a result without its parts                  -> OBSERVATION_NORMALIZATION_FAIL, COMPLETED (the
                                                   provider acted, its answer says not how)

A PARTIAL_SUCCESS or COMPENSATION_REQUIRED key is COMPLETED: some effect happened, a repeat of
the call replays the answer, and `toolgate compensate` finds the result to undo. Pure: execution
(decision.py) and reconciliation (pending.py) judge a Done effect by it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from toolgate.contracts.contract import Contract
from toolgate.schemas.models import FieldError, Outcome, TaxonomyClass
from toolgate.states import KeyStatus
from toolgate.workers.execution.compensation import arguments_for
from toolgate.workers.runtime.results import outcome


@dataclass(frozen=True)
class Judged:
    """What a completed effect's answer makes of the call."""

    outcome: Outcome
    status: KeyStatus
    data: dict[str, Any] | None
    errors: tuple[FieldError, ...] = field(default=())


def judge(contract: Contract, arguments: dict[str, Any], data: dict[str, Any]) -> Judged:
    """The outcome of a Done effect of `contract`'s tool, called with `arguments`, answering `data`."""
    spec = contract.binding.get("parts")
    if spec is None:
        return Judged(outcome(TaxonomyClass.SUCCESS), KeyStatus.COMPLETED, data)
    parts = data.get(spec["field"])
    if not isinstance(parts, list) or not all(isinstance(p, dict) for p in parts):
        error = _error(
            spec["field"], "parts_missing", f"the provider's answer has no list of parts in {spec['field']!r}"
        )
        return Judged(outcome(TaxonomyClass.OBSERVATION_NORMALIZATION_FAIL), KeyStatus.COMPLETED, None, (error,))
    failed = [n for n, part in enumerate(parts) if part.get("ok") is not True]
    if not failed:
        return Judged(outcome(TaxonomyClass.SUCCESS), KeyStatus.COMPLETED, data)
    errors = tuple(_part_error(spec["field"], n, parts[n]) for n in failed)
    if len(failed) == len(parts):
        return _nothing_done(parts, errors)
    if spec["kind"] == "items":
        return Judged(outcome(TaxonomyClass.PARTIAL_SUCCESS), KeyStatus.COMPLETED, data, errors)
    return _compensation_required(contract, arguments, data, spec["field"], failed[0], errors)


def _compensation_required(
    contract: Contract,
    arguments: dict[str, Any],
    data: dict[str, Any],
    name: str,
    first: int,
    errors: tuple[FieldError, ...],
) -> Judged:
    """A step failed after the steps before it committed: the compensation undoes them."""
    tool = contract.document["transactional"]["compensation_tool"]
    template = (contract.binding.get("compensation") or {}).get("arguments") or {}
    compensation = {"tool": tool, "arguments": arguments_for(template, arguments, data)}
    note = _error(
        name,
        "compensation_required",
        f"step {first} failed after {first} step(s) committed; run the compensation {tool} "
        f"(`toolgate compensate` on this call) to undo them",
    )
    return Judged(
        outcome(TaxonomyClass.COMPENSATION_REQUIRED),
        KeyStatus.COMPLETED,
        {**data, "compensation": compensation},
        (*errors, note),
    )


def _nothing_done(parts: list[dict[str, Any]], errors: tuple[FieldError, ...]) -> Judged:
    if all(p.get("retryable") is True for p in parts):
        failure = outcome(TaxonomyClass.DEPENDENCY_UNAVAILABLE)
        return Judged(failure, KeyStatus.FAILED_RETRYABLE, None, errors)
    return Judged(outcome(TaxonomyClass.SEMANTIC_INVALIDITY), KeyStatus.FAILED_FINAL, None, errors)


def _part_error(name: str, index: int, part: dict[str, Any]) -> FieldError:
    found = part.get("error")
    error: dict[str, Any] = found if isinstance(found, dict) else {}
    code = str(error.get("code") or "part_failed")[:100]
    message = str(error.get("message") or "the provider reports this part failed")[:500]
    return _error(f"{name}[{index}]", code, message)


def _error(name: str, code: str, message: str) -> FieldError:
    return FieldError(field=name, code=code, message=message)
