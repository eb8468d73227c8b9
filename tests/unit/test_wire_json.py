"""The JSON of JSON fields (schemas/wire.py): orjson's speed, the standard library's answers."""

from __future__ import annotations

import json
from typing import Any

import pytest
import rfc8785
from hypothesis import given
from hypothesis import strategies as st

from tests.unit.factories import FAST, JSON_VALUES
from toolgate.schemas.wire import _JSON, _loads, canonical_json, compact_json

STANDARD = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)

NO_FLOATS = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=12), children, max_size=5),
    max_leaves=25,
)


def _standard_loads(text: str) -> Any:
    try:
        return ("value", _JSON.decode(text))
    except (ValueError, RecursionError) as exc:
        return ("error", type(exc))


def _ours(text: str) -> Any:
    try:
        return ("value", _loads(text))
    except (ValueError, RecursionError) as exc:
        return ("error", type(exc))


@FAST
@given(NO_FLOATS)
def test_written_as_the_standard_library_writes_it_where_no_float_is(value: Any) -> None:
    """Big integers and lone surrogates included: what orjson refuses, the standard library writes
    (or refuses as it always did)."""
    try:
        expected = STANDARD.encode(value)
    except UnicodeEncodeError:
        return
    assert compact_json(value) == expected


@FAST
@given(JSON_VALUES)
def test_floats_are_written_as_the_same_values(value: Any) -> None:
    assert json.loads(compact_json(value)) == json.loads(STANDARD.encode(value))


@pytest.mark.parametrize(
    "value",
    [{"a": 2**64}, {"a": -(2**63) - 1}, {"a": "\ud800"}, {1: "a key that is not a string"}, {"b": 1, "a": [2**70]}],
)
def test_what_orjson_refuses_the_standard_library_writes(value: Any) -> None:
    assert compact_json(value) == STANDARD.encode(value)


def test_what_json_has_no_form_for_is_still_refused() -> None:
    import datetime as dt
    from dataclasses import dataclass

    @dataclass
    class Point:
        x: int

    for value in ({"at": dt.datetime(2026, 11, 24, tzinfo=dt.UTC)}, {"p": Point(1)}, {"s": {1, 2}}):
        with pytest.raises(TypeError):
            compact_json(value)


@FAST
@given(JSON_VALUES)
def test_read_as_the_standard_library_reads_it(value: Any) -> None:
    text = STANDARD.encode(value)
    assert _ours(text) == _standard_loads(text)


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 123456789012345678901234567890}',  # orjson would read a float
        '{"a": 18446744073709551616}',
        '{"a": -9223372036854775809}',
        '{"a": 18446744073709551615, "b": -9223372036854775808}',
        '{"a": 1234567890123456789.5}',
        '{"a": "\\ud800"}',  # a lone surrogate: orjson refuses it, the standard library keeps it
        '{"a": "\ud800"}',
        '{"a": NaN}',
        '{"a": -Infinity}',
        '{"a": 1e400}',
        '{"a": 1, "a": 2}',
        '{"a": "\x01"}',
        "[" * 5000 + "]" * 5000,
        " {} ",
        "{} x",
        "",
        '{"a": 0.1, "b": 5e-324, "c": 1.7976931348623157e308, "d": -0.0}',
    ],
)
def test_text_where_orjson_would_differ_is_read_as_the_standard_library_reads_it(text: str) -> None:
    assert _ours(text) == _standard_loads(text)


@FAST
@given(st.text(alphabet='0123456789-+.eE[]{}:," a', max_size=60))
def test_any_text_of_numbers_is_read_as_the_standard_library_reads_it(text: str) -> None:
    assert _ours(text) == _standard_loads(text)


@FAST
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_every_float_reads_back_exactly(value: float) -> None:
    assert _loads(compact_json({"f": value})) == {"f": value}


WIDE_TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=8) | st.text(max_size=8)
ANY_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**60), 2**60)
    | st.integers(-(2**53) - 2, -(2**53) + 2)
    | st.integers(2**53 - 2, 2**53 + 2)
    | st.floats(allow_nan=False, allow_infinity=False)
    | WIDE_TEXT,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(WIDE_TEXT, children, max_size=4),
    max_leaves=20,
)


@FAST
@given(ANY_JSON)
def test_canonical_json_is_rfc8785(value: Any) -> None:
    """Whichever way it takes (the plain fast path or the rfc8785 package), the text is RFC 8785's:
    non-BMP keys and strings, integers at the edge of IEEE 754's exact range, floats."""
    try:
        expected = rfc8785.dumps(value).decode()
    except (rfc8785.IntegerDomainError, rfc8785.FloatDomainError):
        with pytest.raises((rfc8785.IntegerDomainError, rfc8785.FloatDomainError)):
            canonical_json(value)
        return
    assert canonical_json(value) == expected


@pytest.mark.parametrize(
    "value",
    ["", {"": ""}, {"a": ["", 1, None, True]}, [[[[]]]], {"k": "\U0001f600"}, {"\U0001f600": 1}, 2**53, [2**53 - 1]],
)
def test_canonical_json_at_the_edges(value: Any) -> None:
    try:
        expected = rfc8785.dumps(value).decode()
    except rfc8785.IntegerDomainError:
        with pytest.raises(rfc8785.IntegerDomainError):
            canonical_json(value)
        return
    assert canonical_json(value) == expected
