"""A round's rows as one jsonb parameter (store/db.py, rows_json): orjson's speed, and
json.dumps's text wherever orjson refuses; and any jsonb parameter (`jsonb`) written by it."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict, dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from psycopg.adapt import PyFormat, Transformer

from tests.unit.factories import FAST, JSON_VALUES
from toolgate.store.db import jsonb, rows_json

ROWS = st.lists(st.dictionaries(st.text(max_size=10), JSON_VALUES, max_size=6), max_size=6)


@FAST
@given(ROWS)
def test_rows_are_the_json_values_json_dumps_writes(rows: list[dict[str, Any]]) -> None:
    assert json.loads(rows_json(rows)) == json.loads(json.dumps(rows))


@pytest.mark.parametrize(
    "rows",
    [
        [{"response": {"text": "\ud800"}}],  # a lone surrogate: escaped, as Postgres always got it
        [{"n": 2**64}],
        [{"detail": {1: "a key that is not a string"}}],
    ],
)
def test_what_orjson_refuses_is_written_as_json_dumps_writes_it(rows: list[dict[str, Any]]) -> None:
    assert rows_json(rows) == json.dumps(rows)


def test_what_json_has_no_form_for_is_still_refused() -> None:
    with pytest.raises(TypeError):
        rows_json([{"at": dt.datetime(2026, 11, 24, tzinfo=dt.UTC)}])
    with pytest.raises(TypeError):
        rows_json([Row("e", ("s",), dt.datetime(2026, 11, 24, tzinfo=dt.UTC))])


@dataclass(frozen=True, slots=True)
class Row:
    event_id: str
    spends: tuple[str, ...]
    amount: Any


@pytest.mark.parametrize(
    "rows",
    [
        [Row("e1", ("calls", "emails"), 125), Row("e2", (), None)],
        [Row("\ud800", ("calls",), 2**64)],  # what orjson refuses: json.dumps writes the same object
    ],
)
def test_a_dataclass_row_is_the_object_of_its_fields(rows: list[Row]) -> None:
    assert json.loads(rows_json(rows)) == json.loads(json.dumps([asdict(r) for r in rows]))


@pytest.mark.parametrize("fmt", [PyFormat.TEXT, PyFormat.BINARY])
@pytest.mark.parametrize("value", [[{"description": "Consulting", "quantity": 2}], {"n": 2**64}, []])
def test_a_jsonb_parameter_is_written_by_rows_json(value: Any, fmt: PyFormat) -> None:
    param = jsonb(value)
    written = bytes(Transformer().get_dumper(param, fmt).dump(param) or b"")
    assert written.removeprefix(b"\x01") == rows_json(value).encode()  # jsonb's binary form: a version byte
