"""Avro single-object encoding of the wire models (schemas/codec.py)."""

from __future__ import annotations

import io
import json
import warnings
from pathlib import Path
from typing import Any

import avro.io
import avro.schema
import pytest
from fastavro import schemaless_reader, schemaless_writer
from fastavro.schema import expand_schema, load_schema
from hypothesis import given
from hypothesis import strategies as st

from tests.unit.factories import FAST, FAST_FEW, JSON_VALUES, TOP_LEVEL, changed, minimal_models, sample_models
from toolgate.schemas import documents, models
from toolgate.schemas.codec import HEADER_LEN, MARKER, DecodeError, codec, schema_fingerprint
from toolgate.schemas.hashing import derive_idempotency_key
from toolgate.schemas.models import ExecutionResult, StageBatch, StageHead, StageHeadCall, StageRecord, ToolProposal
from toolgate.schemas.wire import WireModel, compact_json, field_of

AVRO_DIR = documents.AVRO_DIR
SAMPLES = sample_models()
ENCODED = {cls: codec().encode(model) for cls, model in SAMPLES.items()}


def ids(classes: list[type]) -> list[str]:
    return [c.__name__ for c in classes]


def _strip_private(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_private(v) for k, v in value.items() if not k.startswith("__")}
    if isinstance(value, list):
        return [_strip_private(v) for v in value]
    return value


def apache_schema(path: Path) -> avro.schema.Schema:
    """The .avsc as the Apache avro package parses it, named references resolved like fastavro."""
    expanded = _strip_private(expand_schema(load_schema(str(path))))
    return avro.schema.parse(json.dumps(expanded))


# --- round trips ------------------------------------------------------------------------


def test_samples_cover_every_top_level_model() -> None:
    assert set(SAMPLES) == set(TOP_LEVEL)


@pytest.mark.parametrize("cls", TOP_LEVEL, ids=ids(TOP_LEVEL))
def test_round_trip(cls: type) -> None:
    model = SAMPLES[cls]
    data = codec().encode(model)
    assert codec().decode(data, cls) == model
    assert codec().model_of(data) == model


def _same_kinds(made: Any, validated: Any, where: str) -> None:
    """`made` is `validated` through and through: equal, of the same types, the same fields set."""
    assert type(made) is type(validated), where
    if isinstance(validated, WireModel):
        assert made.model_fields_set == validated.model_fields_set, where
        for name in type(validated).model_fields:
            _same_kinds(getattr(made, name), getattr(validated, name), f"{where}.{name}")
    elif isinstance(validated, list):
        assert len(made) == len(validated), where
        for i, (m, v) in enumerate(zip(made, validated, strict=True)):
            _same_kinds(m, v, f"{where}[{i}]")
    else:
        assert made == validated, where


MODELS = [*SAMPLES.values(), *minimal_models().values()]


@pytest.mark.parametrize("model", MODELS, ids=[f"{type(m).__name__}-{i}" for i, m in enumerate(MODELS)])
def test_a_model_read_is_what_validating_its_record_makes(model: WireModel) -> None:
    """The compiled reader builds models without validating them again (`WireModel.built`):
    what it makes is what pydantic's validation makes of fastavro's record, enum members, nested
    models, parsed JSON and fields set included, and it dumps without a warning."""
    c = codec()
    data = c.encode(model)
    buf = io.BytesIO(data[HEADER_LEN:])
    record = schemaless_reader(buf, c.schema_of(type(model)), None)
    validated = type(model).model_validate(record)
    made = c.model_of(data)
    _same_kinds(made, validated, type(model).__name__)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert made.model_dump() == validated.model_dump()
    assert made == model


@FAST
@given(arguments=JSON_VALUES.filter(lambda v: isinstance(v, dict)))
def test_a_json_field_read_is_what_validating_makes(arguments: dict[str, Any]) -> None:
    model = changed(SAMPLES[StageRecord], arguments=arguments)
    data = codec().encode(model)
    made = codec().model_of(data)
    assert isinstance(made, StageRecord)
    dumped = model.model_dump()
    validated = StageRecord.model_validate({**dumped, "call": {**dumped["call"], "arguments": json.dumps(arguments)}})
    assert made.call.arguments == validated.call.arguments


@pytest.mark.parametrize("cls", list(minimal_models()), ids=ids(list(minimal_models())))
def test_round_trip_with_defaults(cls: type) -> None:
    model = minimal_models()[cls]
    assert codec().decode(codec().encode(model), cls) == model


@pytest.mark.parametrize("cls", TOP_LEVEL, ids=ids(TOP_LEVEL))
def test_header_is_marker_and_fingerprint(cls: type) -> None:
    data = ENCODED[cls]
    assert HEADER_LEN == 10
    assert data[:2] == b"\xc3\x01" == MARKER
    fp = codec().fingerprint_of(cls)
    assert len(fp) == 8
    assert data[2:10] == fp
    assert fp == schema_fingerprint(codec().schema_of(cls))


def test_fingerprints_are_distinct() -> None:
    fps = [codec().fingerprint_of(cls) for cls in TOP_LEVEL]
    assert len(set(fps)) == len(fps)


@FAST_FEW
@given(arguments=st.dictionaries(st.text(max_size=10), JSON_VALUES, max_size=6))
def test_round_trip_arbitrary_json_arguments(arguments: dict[str, Any]) -> None:
    model = changed(SAMPLES[StageRecord], arguments=arguments)
    assert codec().decode(codec().encode(model), StageRecord).call.arguments == arguments


@FAST
@given(text=st.text(), items=st.lists(st.binary(max_size=40), max_size=5))
def test_round_trip_arbitrary_strings_and_bytes(text: str, items: list[bytes]) -> None:
    proposal = SAMPLES[ToolProposal].model_copy(update={"arguments": text, "call_id": text})
    assert codec().decode(codec().encode(proposal), ToolProposal) == proposal
    batch = StageBatch(stage=text, source_partition=0, items=items)
    assert codec().decode(codec().encode(batch), StageBatch) == batch


# --- refusals -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [b"", b"\xc3", b"\xc3\x01", b"hello world, not avro", bytes(range(256)), b"\x00" * 64],
    ids=["empty", "half-marker", "marker-only", "text", "byte-range", "zeros"],
)
def test_random_bytes_refused(data: bytes) -> None:
    with pytest.raises(DecodeError):
        codec().decode(data, ToolProposal)


@pytest.mark.parametrize("cls", TOP_LEVEL, ids=ids(TOP_LEVEL))
def test_every_truncation_refused(cls: type) -> None:
    data = ENCODED[cls]
    for cut in range(len(data)):
        with pytest.raises(DecodeError):
            codec().decode(data[:cut], cls)


@pytest.mark.parametrize("marker", [b"\xc3\x00", b"\xc3\x02", b"\x01\xc3", b"\x00\x00", b"Obj"[:2]])
def test_wrong_marker_refused(marker: bytes) -> None:
    data = ENCODED[ToolProposal]
    with pytest.raises(DecodeError, match="marker"):
        codec().decode(marker + data[2:], ToolProposal)


@pytest.mark.parametrize("fp", [b"\x00" * 8, b"\xff" * 8, b"unknown!"])
def test_unknown_fingerprint_refused(fp: bytes) -> None:
    data = ENCODED[ToolProposal]
    with pytest.raises(DecodeError, match="fingerprint"):
        codec().decode(MARKER + fp + data[HEADER_LEN:], ToolProposal)


def test_fingerprint_with_one_bit_flipped_refused() -> None:
    data = bytearray(ENCODED[StageRecord])
    data[5] ^= 0x01
    with pytest.raises(DecodeError):
        codec().decode(bytes(data), StageRecord)


@pytest.mark.parametrize("cls", TOP_LEVEL, ids=ids(TOP_LEVEL))
@pytest.mark.parametrize("trailer", [b"\x00", b"\x02ab", b"\xff" * 9])
def test_trailing_bytes_refused(cls: type, trailer: bytes) -> None:
    with pytest.raises(DecodeError, match="trailing"):
        codec().decode(ENCODED[cls] + trailer, cls)


@pytest.mark.parametrize("written", TOP_LEVEL, ids=ids(TOP_LEVEL))
def test_decoding_as_the_wrong_type_refused(written: type) -> None:
    data = ENCODED[written]
    for expected in TOP_LEVEL:
        if expected is written:
            continue
        with pytest.raises(DecodeError, match="expected"):
            codec().decode(data, expected)


def _stage_record_with_arguments(text: str) -> bytes:
    c = codec()
    wire = SAMPLES[StageRecord].model_dump()
    wire["call"]["arguments"] = text
    buf = io.BytesIO()
    buf.write(MARKER + c.fingerprint_of(StageRecord))
    schemaless_writer(buf, c.schema_of(StageRecord), wire)
    return buf.getvalue()


@pytest.mark.parametrize("text", ["not json", "[1, 2]", "5", "null", '"a string"', "{"])
def test_json_field_that_is_not_an_object_refused(text: str) -> None:
    with pytest.raises(DecodeError):
        codec().decode(_stage_record_with_arguments(text), StageRecord)


def test_deeply_nested_json_field_refused_with_decode_error() -> None:
    data = _stage_record_with_arguments("[" * 100_000 + "]" * 100_000)
    with pytest.raises(DecodeError):
        codec().decode(data, StageRecord)


@pytest.mark.parametrize("text", ['{"a": NaN}', '{"a": Infinity}'])
def test_non_json_constants_in_json_field_refused(text: str) -> None:
    with pytest.raises(DecodeError):
        codec().decode(_stage_record_with_arguments(text), StageRecord)


# --- cross-check with the Apache avro implementation -------------------------------------


AVSC = sorted(AVRO_DIR.glob("*.avsc"))


@pytest.mark.parametrize("path", AVSC, ids=[p.name for p in AVSC])
def test_fingerprint_matches_apache_avro(path: Path) -> None:
    schema = apache_schema(path)
    theirs = bytes(schema.fingerprint("CRC-64-AVRO"))
    assert len(theirs) == 8
    assert theirs == schema_fingerprint(load_schema(str(path)))
    cls = getattr(models, path.name.removesuffix(".avsc").split(".")[-1])
    if issubclass(cls, WireModel):  # enums are not encoded on their own
        assert theirs == codec().fingerprint_of(cls)


@pytest.mark.parametrize("cls", TOP_LEVEL, ids=ids(TOP_LEVEL))
def test_codec_fingerprint_matches_apache_avro(cls: type) -> None:
    schema = apache_schema(AVRO_DIR / f"{cls.avro_name}.avsc")
    assert bytes(schema.fingerprint("CRC-64-AVRO")) == codec().fingerprint_of(cls)


def _apache_encode(cls: type, datum: dict[str, Any]) -> bytes:
    schema = apache_schema(AVRO_DIR / f"{cls.avro_name}.avsc")
    buf = io.BytesIO()
    buf.write(MARKER + bytes(schema.fingerprint("CRC-64-AVRO")))
    avro.io.DatumWriter(schema).write(datum, avro.io.BinaryEncoder(buf))
    return buf.getvalue()


def test_decode_record_written_by_apache_avro_tool_proposal() -> None:
    datum = {
        "call_id": "call_apache",
        "tenant_id": "acme",
        "principal": {"user_id": "u", "agent_id": "a", "scopes": ["invoices:read"]},
        "workflow_id": "wf",
        "run_id": "run",
        "logical_operation_id": "op",
        "tool_name": "invoice.fetch",
        "tool_version": "1.x",
        "arguments": '{"invoice_id": "inv_acme0001"}',
        "idempotency_key": None,
        "deadline_ms": 1_800_000_000_000,
        "repair_attempt": 1,
        "dry_run": True,
        "created_at_ms": 1_700_000_000_000,
        "compensation_of": None,
        "key_id": "k_0123456789abcdef",
        "signature": b"\x00" * 64,
        "signature_proof": b"L" + b"\x01" * 32,
        "edit": None,
    }
    model = codec().decode(_apache_encode(ToolProposal, datum), ToolProposal)
    assert model.model_dump() == datum


def test_decode_record_written_by_apache_avro_with_json_and_enums() -> None:
    datum = {
        "call_id": "c",
        "traceparent": "tp",
        "home_partition": 2,
        "tenant_id": "acme",
        "principal": {"user_id": "u", "agent_id": "a", "scopes": []},
        "workflow_id": "w",
        "run_id": "r",
        "tool_name": "invoice.fetch",
        "tool_version": "1.0.0",
        "stage": "execution",
        "outcome": {
            "taxonomy_class": "TIMEOUT",
            "code": 504,
            "is_error": True,
            "retryable": True,
            "repairable": False,
            "requires_approval": False,
            "fail_closed": False,
            "next_action": "retry_with_same_key",
            "retry_after_ms": 250,
        },
        "data": '{"b": [1, 2], "a": null}',
        "errors": [{"field": "x", "message": "m", "code": "c", "expected": None, "actual": "y"}],
        "warnings": ["w"],
        "idempotency_hit": True,
        "attempt_number": 2,
        "verification": {
            "post_action_verification_required": True,
            "target_state_reference": None,
            "expected_state": '{"status": "draft"}',
            "delay_seconds": 3,
        },
        "approval_id": None,
        "created_at_ms": 1,
        "completed_at_ms": 2,
        "proposal_digest": "sha256:" + "ab" * 32,
    }
    model = codec().decode(_apache_encode(ExecutionResult, datum), ExecutionResult)
    assert model.data == {"a": None, "b": [1, 2]}
    assert model.outcome.taxonomy_class is models.TaxonomyClass.TIMEOUT
    assert model.outcome.retry_after_ms == 250
    assert model.verification.expected_state == {"status": "draft"}
    assert model.errors[0].actual == "y"
    # and what the codec writes, Apache avro reads back
    written = codec().encode(model)
    schema = apache_schema(AVRO_DIR / "toolgate.ExecutionResult.avsc")
    buf = io.BytesIO(written[HEADER_LEN:])
    back = avro.io.DatumReader(schema).read(avro.io.BinaryDecoder(buf))
    assert back["call_id"] == "c" and json.loads(back["data"]) == {"a": None, "b": [1, 2]}


# --- fuzzing: nothing but DecodeError ----------------------------------------------------


KNOWN_HEADERS = [MARKER + codec().fingerprint_of(cls) for cls in TOP_LEVEL]


def _decode_only_decode_error(data: bytes) -> None:
    try:
        model = codec().decode(data, ToolProposal)
    except DecodeError:
        return
    assert isinstance(model, ToolProposal)


@FAST
@given(data=st.binary(max_size=200))
def test_random_bytes_only_decode_error(data: bytes) -> None:
    _decode_only_decode_error(data)


@FAST
@given(body=st.binary(max_size=200))
def test_random_body_after_tool_proposal_header_only_decode_error(body: bytes) -> None:
    _decode_only_decode_error(MARKER + codec().fingerprint_of(ToolProposal) + body)


@FAST
@given(header=st.sampled_from(KNOWN_HEADERS), body=st.binary(max_size=200))
def test_random_body_after_any_known_header_only_decode_error(header: bytes, body: bytes) -> None:
    _decode_only_decode_error(header + body)


@FAST
@given(position=st.integers(min_value=HEADER_LEN, max_value=10_000), value=st.integers(0, 255))
def test_corrupted_byte_only_decode_error(position: int, value: int) -> None:
    data = bytearray(ENCODED[ToolProposal])
    data[position % len(data)] = value
    _decode_only_decode_error(bytes(data))


@pytest.mark.parametrize("cls", TOP_LEVEL, ids=lambda c: c.__name__)
def test_field_of_reads_every_field_as_getattr_does_and_none_for_the_rest(cls: type) -> None:
    model = sample_models()[cls]
    for name in type(model).model_fields:
        assert field_of(model, name) == getattr(model, name)
    assert field_of(model, "no_such_field") is None
    assert field_of(object(), "call_id") is None  # no __dict__ at all


def test_a_projection_is_the_fields_decoding_makes_of_the_record_and_of_its_call() -> None:
    record = SAMPLES[StageRecord]
    head = codec().project(ENCODED[StageRecord], StageHead)
    assert isinstance(head, StageHead) and isinstance(head.call, StageHeadCall)
    assert head.required_approvals == record.required_approvals and head.approval_id == record.approval_id
    assert head.call.model_dump() == {name: getattr(record.call, name) for name in StageHeadCall.model_fields}


def test_a_projection_of_an_older_release_is_left_to_decode_which_nests_its_call() -> None:
    old = load_schema(str(AVRO_DIR / "released" / "0.1.0" / "toolgate.StageRecord.avsc"))
    sample = SAMPLES[StageRecord]
    flat = {
        **sample.model_dump(exclude={"call"}),
        **sample.call.model_dump(exclude={"idempotency_key", "request_hash"}),
    }
    buf = io.BytesIO()
    schemaless_writer(buf, old, {**flat, "idempotency_key": None, "arguments": compact_json(sample.call.arguments)})
    written = MARKER + schema_fingerprint(old) + buf.getvalue()
    assert schema_fingerprint(old) != codec().fingerprint_of(StageRecord)
    assert codec().project(written, StageHead) is None
    upgraded = codec().decode(written, StageRecord)
    # 0.1.0 carried no key (the caller gave none): it is derived as validation derives it
    assert upgraded == changed(sample, idempotency_key=upgraded.call.idempotency_key)
    assert upgraded.call.idempotency_key == derive_idempotency_key(
        workflow_id=flat["workflow_id"],
        run_id=flat["run_id"],
        tenant_id=flat["tenant_id"],
        user_id=sample.call.principal.user_id,
        tool_name=flat["tool_name"],
        tool_version=flat["tool_version"],
        logical_operation_id=flat["logical_operation_id"],
        payload_hash=flat["payload_hash"],
    )


def test_a_projection_of_anything_else_is_refused() -> None:
    with pytest.raises(DecodeError):
        codec().project(ENCODED[ExecutionResult], StageHead)
    with pytest.raises(DecodeError):
        codec().project(b"\xc3\x01" + b"\x00" * 8, StageHead)
    with pytest.raises(DecodeError):
        codec().project(b"not avro", StageHead)
    with pytest.raises(DecodeError):
        codec().project(ENCODED[StageRecord][: HEADER_LEN + 3], StageHead)


def test_a_call_read_is_written_again_as_its_bytes_and_a_changed_one_is_encoded() -> None:
    encoded = ENCODED[StageRecord]
    record = codec().decode(encoded, StageRecord)
    passed_on = record.model_copy(update={"required_approvals": 0, "decisions": []})
    again = codec().encode(passed_on)
    body = encoded[encoded.index(record.call.__dict__["_wire"]) :]
    assert again.endswith(body) and codec().decode(again, StageRecord) == passed_on
    edited = changed(record, tool_version="9.9.9")
    assert "_wire" not in edited.call.__dict__
    assert codec().decode(codec().encode(edited), StageRecord).call.tool_version == "9.9.9"
    with pytest.raises(TypeError, match="no fields"):
        record.model_copy(update={"tool_version": "9.9.9"})  # a call's field, not the record's
