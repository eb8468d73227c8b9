"""The parse gate answers as `json.loads` with a duplicate-refusing hook does, for any text
(workers/validation/arguments.py)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tests.unit.factories import FAST, JSON_VALUES
from toolgate.workers.validation.arguments import parse_arguments


class Repeated(Exception):
    pass


def one_by_one(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise Repeated(key)
        seen[key] = value
    return seen


def no_constant(name: str) -> Any:
    raise ValueError(name)


def reference(text: str) -> tuple[str, Any]:
    """What the gate must say: the value, or the kind of refusal (and the key given twice)."""
    try:
        return "value", json.loads(text, object_pairs_hook=one_by_one, parse_constant=no_constant)
    except Repeated as exc:
        return "duplicate_key", str(exc)
    except (ValueError, RecursionError):
        return "invalid_json", None


def answer(text: str) -> tuple[str, Any]:
    value, error = parse_arguments(text)
    if error is None:
        return "value", value
    return error.code, error.field if error.code == "duplicate_key" else None


KEYS = st.sampled_from(["a", "b", "c", "é", ""])
PAIRS = st.lists(st.tuples(KEYS, JSON_VALUES.map(json.dumps)), max_size=5)


def obj(pairs: list[tuple[str, str]]) -> str:
    return "{" + ",".join(f"{json.dumps(k)}:{v}" for k, v in pairs) + "}"


TEXTS = (
    JSON_VALUES.map(json.dumps)
    | PAIRS.map(obj)
    | st.lists(PAIRS.map(obj), max_size=3).map(lambda objs: "[" + ",".join(objs) + "]")
    | st.builds(lambda inner, outer: obj([*outer, ("x", obj(inner))]), PAIRS, PAIRS)
    | st.text(max_size=20)
    | JSON_VALUES.map(lambda v: "\ufeff" + json.dumps(v))
    | st.sampled_from(["NaN", "[Infinity]", '{"a": -Infinity}', "{} x", " {}  "])
)


@FAST
@given(TEXTS)
def test_the_gate_answers_as_json_loads_with_a_hook_that_refuses_a_repeated_key(text: str) -> None:
    assert answer(text) == reference(text)
