"""Avro bodies compiled from a schema (schemas/avro_compiled.py) are fastavro's, byte for byte."""

from __future__ import annotations

import io
from typing import Any

import pytest
from fastavro import parse_schema, schemaless_reader, schemaless_writer
from hypothesis import given
from hypothesis import strategies as st

from tests.unit.factories import FAST, TOP_LEVEL, changed, minimal_models, sample_models
from toolgate.schemas.avro_base import Unsupported, read_long, write_long
from toolgate.schemas.avro_compiled import compile_codec, compile_head
from toolgate.schemas.codec import HEADER_LEN, _to_wire, codec
from toolgate.schemas.models import Call, StageRecord
from toolgate.schemas.wire import WireModel

MODELS = [*sample_models().values(), *minimal_models().values()]


def _wire(model: WireModel) -> tuple[Any, dict[str, Any]]:
    c = codec()
    parsed = c.schema_of(type(model))
    return parsed, _to_wire(model.model_dump(), c._json_paths[type(model)])


def _fastavro_bytes(parsed: Any, record: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    schemaless_writer(buf, parsed, record)
    return buf.getvalue()


def _fastavro_read(parsed: Any, body: bytes) -> tuple[Any, int]:
    buf = io.BytesIO(body)
    return schemaless_reader(buf, parsed, None), buf.tell()


@pytest.mark.parametrize("model", MODELS, ids=[f"{type(m).__name__}-{i}" for i, m in enumerate(MODELS)])
def test_writes_and_reads_what_fastavro_does(model: WireModel) -> None:
    parsed, record = _wire(model)
    read, write = compile_codec(parsed)
    out = bytearray()
    write(out, record)
    assert bytes(out) == _fastavro_bytes(parsed, record)
    assert read(bytes(out), 0) == _fastavro_read(parsed, bytes(out))


def test_the_codec_compiles_every_schema_of_today() -> None:
    c = codec()
    assert set(c._compiled_writers) == set(c._writers) >= set(TOP_LEVEL)


@FAST
@given(
    created=st.integers(-(2**63), 2**63 - 1),
    attempt=st.integers(-(2**31), 2**31 - 1),
    text=st.text(max_size=300),
    items=st.lists(st.text(max_size=70), max_size=70),
    key=st.text(max_size=5),
)
def test_any_values_round_trip_as_fastavro_writes_them(
    created: int, attempt: int, text: str, items: list[str], key: str
) -> None:
    update = {"created_at_ms": created, "attempt": attempt, "call_id": text, "warnings": items, "idempotency_key": key}
    record = changed(sample_models()[StageRecord], **update)
    parsed, wire = _wire(record)
    read, write = compile_codec(parsed)
    out = bytearray()
    write(out, wire)
    assert bytes(out) == _fastavro_bytes(parsed, wire)
    assert read(bytes(out), 0) == (wire, len(out))


@pytest.mark.parametrize("size", [0, 1, 63, 64, 65, 8191, 8192])
def test_a_length_on_either_side_of_one_varint_byte_is_written_as_fastavro_writes_it(size: int) -> None:
    """A string's or an array's length under 64 is written inline as one byte, any other by
    `write_long`: both sides of the edge, in bytes and in items."""
    update = {"call_id": "é" * (size // 2) + "x" * (size % 2), "warnings": ["w"] * size}
    parsed, wire = _wire(changed(sample_models()[StageRecord], **update))
    read, write = compile_codec(parsed)
    out = bytearray()
    write(out, wire)
    assert bytes(out) == _fastavro_bytes(parsed, wire)
    assert read(bytes(out), 0) == (wire, len(out))


@FAST
@given(position=st.integers(0, 10_000), value=st.integers(0, 255), cut=st.integers(0, 10_000))
def test_a_corrupt_body_is_refused_or_read_as_fastavro_reads_it(position: int, value: int, cut: int) -> None:
    """Never a different answer: what the compiled reader accepts, fastavro reads the same."""
    parsed, wire = _wire(sample_models()[StageRecord])
    body = bytearray(_fastavro_bytes(parsed, wire))
    body[position % len(body)] = value
    body = body[: cut % (len(body) + 1)]
    read, _ = compile_codec(parsed)
    try:
        got = read(bytes(body), 0)
    except (IndexError, EOFError, ValueError, UnicodeDecodeError):
        return
    assert got == _fastavro_read(parsed, bytes(body))


@pytest.mark.parametrize("model", MODELS[: len(TOP_LEVEL)], ids=[type(m).__name__ for m in MODELS[: len(TOP_LEVEL)]])
def test_every_truncation_raises(model: WireModel) -> None:
    parsed, wire = _wire(model)
    read, _ = compile_codec(parsed)
    body = _fastavro_bytes(parsed, wire)
    for end in range(len(body)):
        with pytest.raises((IndexError, EOFError)):
            read(body[:end], 0)


@pytest.mark.parametrize(
    "field_type",
    [
        {"type": "map", "values": "string"},
        {"type": "fixed", "name": "F", "size": 4},
        "float",
        "double",
        ["string", "long"],
        ["null", "string", "long"],
        {"type": "long", "logicalType": "timestamp-millis"},
    ],
    ids=["map", "fixed", "float", "double", "union-of-two", "union-of-three", "logical"],
)
def test_what_it_does_not_cover_is_unsupported(field_type: Any) -> None:
    schema = parse_schema({"type": "record", "name": "R", "fields": [{"name": "f", "type": field_type}]})
    with pytest.raises(Unsupported):
        compile_codec(schema)


@pytest.mark.parametrize("value", [0, 1, -1, 63, 64, -65, 2**31, -(2**31), 2**63 - 1, -(2**63)])
def test_varints_round_trip(value: int) -> None:
    out = bytearray()
    write_long(out, value)
    assert read_long(bytes(out), 0) == (value, len(out))


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1])
def test_a_long_out_of_range_is_refused(value: int) -> None:
    with pytest.raises(OverflowError):
        write_long(bytearray(), value)


def test_a_negative_enum_index_is_refused() -> None:
    enum = {"type": "enum", "name": "E", "symbols": ["A", "B"]}
    read, _ = compile_codec(parse_schema({"type": "record", "name": "R", "fields": [{"name": "e", "type": enum}]}))
    assert read(b"\x02", 0) == ({"e": "B"}, 1)
    with pytest.raises(ValueError, match="negative"):
        read(b"\x01", 0)  # zig-zag -1: fastavro would take the last symbol
    with pytest.raises(IndexError):
        read(b"\x04", 0)


@pytest.mark.parametrize("model", MODELS, ids=[f"{type(m).__name__}-{i}" for i, m in enumerate(MODELS)])
def test_the_codec_writes_from_its_models_what_fastavro_writes(model: WireModel) -> None:
    """The codec's writers take each record's fields from its model (no `model_dump`), and
    each JSON field as compact JSON: the body is fastavro's of the dumped record, byte for byte."""
    data = codec().encode(model)
    parsed, wire = _wire(model)
    assert data[HEADER_LEN:] == _fastavro_bytes(parsed, wire)


def test_header_length_is_where_bodies_start() -> None:
    """The codec hands the compiled reader the whole value and the body's offset."""
    model = sample_models()[StageRecord]
    data = codec().encode(model)
    parsed, wire = _wire(model)
    assert data[HEADER_LEN:] == _fastavro_bytes(parsed, wire)


def test_a_field_left_out_takes_its_own_records_default_as_fastavro_writes_it() -> None:
    """Two records with a defaulted field at the same place: each writes its own default."""
    inner = {"type": "record", "name": "Inner", "fields": [{"name": "n", "type": "long", "default": 7}]}
    outer = {
        "type": "record",
        "name": "Outer",
        "fields": [{"name": "m", "type": "long", "default": 3}, {"name": "i", "type": inner}],
    }
    schema = parse_schema(outer)
    _, write = compile_codec(schema)
    out = bytearray()
    write(out, {"i": {}})
    assert bytes(out) == _fastavro_bytes(schema, {"i": {}})


def _field_sets(model: WireModel) -> list[frozenset[str]]:
    """Each field alone, each leading run of fields, and every other field."""
    names = [f["name"] for f in codec().schema_of(type(model))["fields"]]  # type: ignore[index]
    return [
        *(frozenset({n}) for n in names),
        *(frozenset(names[:i]) for i in range(1, len(names) + 1)),
        frozenset(names[::2]),
    ]


@pytest.mark.parametrize("model", MODELS, ids=[f"{type(m).__name__}-{i}" for i, m in enumerate(MODELS)])
def test_a_head_reads_its_fields_as_the_whole_reader_does(model: WireModel) -> None:
    parsed, wire = _wire(model)
    read, _ = compile_codec(parsed)
    body = _fastavro_bytes(parsed, wire)
    whole, _ = read(body, 0)
    for names in _field_sets(model):
        got, end = compile_head(parsed, names)(body, 0)
        assert got == {n: whole[n] for n in names}
        assert end <= len(body)


@FAST
@given(
    text=st.text(max_size=300),
    items=st.lists(st.text(max_size=70), max_size=70),
    key=st.text(max_size=5),
    approvals=st.integers(-(2**31), 2**31 - 1),
    names=st.sets(st.sampled_from(sorted(StageRecord.model_fields)), min_size=1),
    inner=st.sets(st.sampled_from(sorted(Call.model_fields)), max_size=4),
)
def test_a_head_of_any_values_is_what_the_whole_reader_reads(
    text: str, items: list[str], key: str, approvals: int, names: set[str], inner: set[str]
) -> None:
    """Of the record's own fields, and of its call's (the last field) when `inner` names some."""
    update = {"call_id": text, "approvers": items, "warnings": items, "idempotency_key": key}
    record = changed(sample_models()[StageRecord], **update, required_approvals=approvals)
    parsed, wire = _wire(record)
    read, _ = compile_codec(parsed)
    body = _fastavro_bytes(parsed, wire)
    whole = read(body, 0)[0]
    if inner:
        names = (names - {"call"}) | {f"call.{name}" for name in inner}
    got, _ = compile_head(parsed, frozenset(names))(body, 0)
    expected = {n: v for n, v in whole.items() if n in names}
    if inner:
        expected["call"] = {n: v for n, v in whole["call"].items() if n in inner}
    assert got == expected


def test_a_head_cut_short_raises() -> None:
    parsed, wire = _wire(sample_models()[StageRecord])
    body = _fastavro_bytes(parsed, wire)
    head = compile_head(parsed, frozenset({"approval_id"}))
    _, end = head(body, 0)
    for cut in range(end):
        with pytest.raises((IndexError, EOFError)):
            head(body[:cut], 0)


def test_a_head_of_a_field_the_record_lacks_is_unsupported() -> None:
    parsed, _ = _wire(sample_models()[StageRecord])
    with pytest.raises(Unsupported):
        compile_head(parsed, frozenset({"call_id", "no_such_field"}))
    with pytest.raises(Unsupported):
        compile_head(parsed, frozenset())


@FAST
@given(position=st.integers(0, 10_000), value=st.integers(0, 255), cut=st.integers(0, 10_000))
def test_a_head_of_a_corrupt_body_raises_or_reads_what_the_whole_reader_reads(
    position: int, value: int, cut: int
) -> None:
    parsed, wire = _wire(sample_models()[StageRecord])
    body = bytearray(_fastavro_bytes(parsed, wire))
    body[position % len(body)] = value
    body = body[: cut % (len(body) + 1)]
    names = frozenset({"call_id", "tool_name", "required_approvals", "approval_id"})
    try:
        got, _ = compile_head(parsed, names)(bytes(body), 0)
    except (IndexError, EOFError, ValueError, UnicodeDecodeError):
        return
    read, _ = compile_codec(parsed)
    try:
        whole, _ = read(bytes(body), 0)
    except (IndexError, EOFError, ValueError, UnicodeDecodeError):
        return  # the rest, after the head, is what is corrupt
    assert got == {n: whole[n] for n in names}


def test_a_block_with_its_size_is_stepped_over_item_by_item() -> None:
    schema = parse_schema(
        {
            "type": "record",
            "name": "R",
            "fields": [{"name": "a", "type": {"type": "array", "items": "long"}}, {"name": "b", "type": "string"}],
        }
    )
    body = bytes([3, 0x80, 0x01, 2, 4, 0, 2]) + b"x"  # 2 items, "64 bytes" (they are 2): 1, 2; then "x"
    assert compile_head(schema, frozenset({"b"}))(body, 0) == ({"b": "x"}, len(body))
    assert compile_codec(schema)[0](body, 0) == ({"a": [1, 2], "b": "x"}, len(body))
