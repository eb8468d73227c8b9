"""JSON Schema validation whose work is counted: a Draft 2020-12 validator in which every keyword
evaluation spends one unit of a meter that the caller sets around an iteration (`metered`), and
the iteration stops with `Spent` once the meter is spent.

Why count evaluations and not errors: jsonschema yields errors lazily, but walks every item of an
array however few errors they hold, and computes the errors of every alternative of an anyOf or
oneOf eagerly. Taking the first 50 errors therefore bounds how many are made, not the work of
looking for them (a 240 KiB array of valid items beyond its maxItems was slow to walk:
docs/performance.md, "Figures behind the code").
Keyword evaluations are what that work is made of, and counting them is deterministic: no clock,
the same count for the same arguments on any machine.

Outside `metered` nothing is counted: admission checks a contract's examples with the same
validator, unbounded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator, validators


class Spent(Exception):
    """The meter around an iteration ran out: the iteration stops where it is."""


@dataclass
class Meter:
    """Keyword evaluations allowed and used within one `metered` block."""

    limit: int
    used: int = 0


_METER: ContextVar[Meter | None] = ContextVar("toolgate_schema_meter", default=None)

Keyword = Callable[[Any, Any, Any, Any], Any]


def _counted(keyword: Keyword) -> Keyword:
    def evaluate(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        meter = _METER.get()
        if meter is not None:
            meter.used += 1
            if meter.used > meter.limit:
                raise Spent(f"{meter.limit} keyword evaluations")
        return keyword(validator, value, instance, schema)

    return evaluate


# Draft 2020-12 with every keyword counted; without a meter it validates exactly as Draft202012Validator.
MeteredValidator: Any = validators.extend(  # type: ignore[no-untyped-call]  # jsonschema leaves it untyped
    Draft202012Validator, {name: _counted(fn) for name, fn in Draft202012Validator.VALIDATORS.items()}
)


@contextmanager
def metered(limit: int) -> Iterator[Meter]:
    """Count the keyword evaluations of MeteredValidators inside the block, up to `limit`."""
    meter = Meter(limit)
    token = _METER.set(meter)
    try:
        yield meter
    finally:
        _METER.reset(token)
