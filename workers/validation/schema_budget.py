"""What validation spends to say why arguments fail their contract's input schema: bounded before
the work, by count and by work, never by the clock. Pure.

The compiled validator only says yes or no (`Contract.accepts_input`, far faster); only arguments
it refuses are looked at again, in three steps, all within WORK units (a unit: one keyword
evaluation, or one value visited by the size check):

    1. size bounds    maxItems, maxLength, maxProperties, where the schema declares them along
                      `properties` and `items`: a value beyond one is refused as a whole, and
                      nothing inside it is looked at (a 240 KiB array beyond maxItems 50 costs
                      one comparison, not 14,400 findings)
    2. findings       jsonschema's errors, lazily, until MAX_FINDINGS or WORK is reached
                      (schema_work.metered): an answer names at most MAX_FINDINGS field errors,
                      the last one saying that more were not looked for
    3. fail closed    work spent before any finding: the compiled validator's first violation,
                      so a refusal is never a pass for want of work

The work a refusal took goes with it (`Findings.work`), for the agent's admission rate
(admission_rate.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import fastjsonschema

from toolgate.contracts.contract import Contract
from toolgate.contracts.schema_work import Spent, metered
from toolgate.schemas.models import FieldError, TaxonomyClass
from toolgate.workers.runtime.results import MAX_ERRORS
from toolgate.workers.validation.schema_findings import BOUNDS, Finding, bound_finding, classify, ordered

MAX_FINDINGS = MAX_ERRORS  # field errors in one answer, the note that more exist included
# Keyword evaluations (and values visited) one refusal may cost: about three times what the
# largest arguments the shipped contracts accept take to check whole (invoice.create_draft with
# 50 lines: 666), milliseconds of CPU (docs/performance.md, "Figures behind the code").
WORK = 2048
SIZE_BOUNDS = (("maxItems", list), ("maxLength", str), ("maxProperties", dict))


@dataclass(frozen=True)
class Findings:
    worst: TaxonomyClass
    errors: tuple[FieldError, ...]
    work: int  # units spent finding them


def findings(
    contract: Contract, arguments: Any, violation: fastjsonschema.JsonSchemaException | None = None
) -> Findings | None:
    """Why `arguments` fail the input schema, which the compiled validator refused them for
    (`violation`, its first); None if jsonschema, given all the work it needed, finds nothing
    (the two disagree on a format)."""
    sizes = Sizes()
    sizes.check(contract.input_schema, arguments, [])
    if sizes.found:
        return _answer(sizes.found, sizes.work, "only sizes were checked, and values beyond theirs are refused whole")
    found: list[Finding] = []
    try:
        with metered(WORK - sizes.work) as meter:
            for error in contract.input_validator.iter_errors(arguments):
                found.extend(classify(error))
                if len(found) >= MAX_FINDINGS:
                    return _answer(found, sizes.work + meter.used, f"validation stopped at {MAX_FINDINGS - 1} findings")
    except Spent:
        found = found or [fast_finding(violation)]
        return _answer(found, WORK, f"validation stopped after {WORK} schema checks")
    return _answer(found, sizes.work + meter.used) if found else None


def _answer(found: Sequence[Finding], work: int, stopped: str | None = None) -> Findings:
    """The findings in gate order, at most MAX_FINDINGS with the note that says why there may be more."""
    worst, errors = ordered(found)
    if stopped is not None:
        note = FieldError(
            field=None,
            code="more_errors",
            message=f"{stopped}; fix these and send the call again to hear of anything else",
        )
        errors = (*errors[: MAX_FINDINGS - 1], note)
    return Findings(worst, errors, work)


class Sizes:
    """Step 1: values beyond a size bound their schema declares, found with bounded work."""

    def __init__(self) -> None:
        self.found: list[Finding] = []
        self.work = 0
        self.full = False  # stopped before looking at everything: out of work or of room

    def check(self, schema: Any, instance: Any, where: list[Any]) -> None:
        self.work += 1
        if self.work >= WORK or len(self.found) >= MAX_FINDINGS:
            self.full = True
            return
        if not isinstance(schema, Mapping):
            return
        for keyword, kind in SIZE_BOUNDS:
            bound = schema.get(keyword)
            if isinstance(bound, int) and isinstance(instance, kind) and len(instance) > bound:
                self.found.append(bound_finding(where, keyword, bound, instance))
                return  # refused as a whole: what it holds is not looked at
        if isinstance(instance, dict):
            for name, sub in (schema.get("properties") or {}).items():
                if name in instance and not self.full:
                    self.check(sub, instance[name], [*where, name])
        elif isinstance(instance, list) and isinstance(schema.get("items"), Mapping):
            for i, item in enumerate(instance):
                if self.full:
                    return
                self.check(schema["items"], item, [*where, i])


def fast_finding(violation: fastjsonschema.JsonSchemaException | None) -> Finding:
    """The compiled validator's first violation as a finding (step 3)."""
    if violation is None:  # it refused these arguments once; fail closed all the same
        error = FieldError(field=None, code="schema.violation", message="the arguments do not satisfy the input schema")
        return TaxonomyClass.STRUCTURAL_VIOLATION, error
    rule = str(getattr(violation, "rule", "") or "")
    name = str(getattr(violation, "name", "") or "data")
    field = name.removeprefix("data").removeprefix(".") or None
    message = str(getattr(violation, "message", violation)).replace(name, field or "arguments", 1)
    if rule in BOUNDS:
        taxonomy, code = TaxonomyClass.OUT_OF_BOUNDS, f"out_of_bounds.{rule}"
    elif rule == "type":
        taxonomy, code = TaxonomyClass.TYPE_MISMATCH, "type_mismatch"
    else:
        taxonomy, code = TaxonomyClass.STRUCTURAL_VIOLATION, f"schema.{rule or 'violation'}"
    return taxonomy, FieldError(field=field, code=code, message=message[:300])
