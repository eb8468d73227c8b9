"""Whatever a producer writes is read defensively: headers, sizes, text, outputs, produce errors."""

from __future__ import annotations

import contextlib
import json

import pytest
from confluent_kafka import KafkaError
from hypothesis import given
from hypothesis import strategies as st

from tests.unit.factories import FAST, proposal, registry, stage_record
from toolgate.schemas.codec import MARKER, DecodeError, codec
from toolgate.schemas.models import FieldError, Principal, TaxonomyClass, ToolProposal
from toolgate.telemetry.traceparent import parse_traceparent
from toolgate.topics.headers import header_int
from toolgate.workers.runtime import results
from toolgate.workers.runtime.delivery import is_undeliverable
from toolgate.workers.runtime.producer import ProduceError
from toolgate.workers.validation import limits
from toolgate.workers.validation.arguments import parse_arguments


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, 1),
        (b"3", 3),
        (b"x", 1),
        (b"-2", 1),
        (b"0", 1),
        (b"\xff", 1),
        (b"9" * 30, 1),
        (b" 7", 7),
        (b"1e3", 1),
        (b"\x1c0", 1),
        (b"\xe3\x80\x803", 1),
    ],
)
def test_an_integer_header_is_whatever_parses_in_range_else_the_default(raw: bytes | None, expected: int) -> None:
    headers = [] if raw is None else [("toolgate-attempts", raw)]
    assert header_int(headers, "toolgate-attempts", default=1, low=1, high=1000) == expected


@FAST
@given(st.binary(max_size=80) | st.text(max_size=80).map(str.encode))
def test_header_int_never_raises(raw: bytes) -> None:
    assert 1 <= header_int([("n", raw)], "n", default=1, low=1, high=10) <= 10


@FAST
@given(st.text(max_size=70))
def test_a_traceparent_that_is_not_one_is_none(text: str) -> None:
    parsed = parse_traceparent(text)
    assert parsed is None or text.startswith("00-")


def test_traceparents_of_the_wrong_shape_are_refused() -> None:
    assert parse_traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01") is not None
    for bad in ("00-" + "g" * 32 + "-b7ad6b7169203331-01", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b71692033-0101"):
        assert parse_traceparent(bad) is None


# --- sizes ------------------------------------------------------------------------------------


def test_a_proposal_within_limits_passes() -> None:
    assert limits.check(proposal("invoice.fetch", "{}"), 1000) is None


def test_an_oversized_field_is_answerable_when_the_routing_fields_fit() -> None:
    big = proposal("invoice.fetch", "{}", workflow_id="w" * 300_000)
    found = limits.check(big, 600_000)
    assert found is not None and found.answerable
    assert [(e.field, e.code) for e in found.errors] == [(None, "too_large"), ("workflow_id", "too_long")]
    trimmed = limits.trimmed(big)
    assert trimmed.workflow_id == "" and trimmed.call_id == big.call_id and trimmed.arguments == ""


@pytest.mark.parametrize("field", ["call_id", "run_id"])
def test_an_oversized_routing_field_names_no_call_that_can_be_answered(field: str) -> None:
    found = limits.check(proposal("invoice.fetch", "{}", **{field: "x" * 1000}), 2000)
    assert found is not None and not found.answerable
    assert limits.routable("x" * 1000) is None and limits.routable("call_1") == "call_1"


def test_too_many_scopes_is_out_of_bounds() -> None:
    many = proposal("invoice.fetch", "{}", principal=Principal(user_id="u", agent_id="a", scopes=["s"] * 65))
    found = limits.check(many, 1000)
    assert found is not None and [e.code for e in found.errors] == ["too_many"]
    assert len(limits.trimmed(many).principal.scopes) == limits.MAX_SCOPES


# --- text that is not UTF-8 -------------------------------------------------------------------


def _with_arguments(raw: bytes, **fields: str) -> bytes:
    clean = codec().encode(proposal("invoice.fetch", "ARGS", **fields))
    return clean.replace(b"ARGS", raw)  # same length: the Avro length prefix still holds


def test_argument_bytes_that_are_not_utf8_keep_the_call_identified() -> None:
    data = _with_arguments(b"\xff\xfe{}")
    with pytest.raises(DecodeError):
        codec().decode(data, ToolProposal)
    lenient = codec().decode_lenient(data, ToolProposal, frozenset({"arguments"}))
    assert lenient.call_id == "call_1" and lenient.arguments.encode("utf-8", "surrogateescape") == b"\xff\xfe{}"
    _, error = parse_arguments(lenient.arguments)
    assert error is not None and error.code == "invalid_utf8"


def test_identity_fields_that_are_not_utf8_still_make_the_record_undecodable() -> None:
    data = codec().encode(proposal("invoice.fetch", "{}", call_id="call_ABCD")).replace(b"ABCD", b"\xff\xfe\xfd\xfc")
    with pytest.raises(DecodeError):
        codec().decode_lenient(data, ToolProposal, frozenset({"arguments"}))


def test_lenient_decoding_of_a_clean_record_is_plain_decoding() -> None:
    clean = proposal("invoice.fetch", '{"a": "ü"}')
    assert codec().decode_lenient(codec().encode(clean), ToolProposal, frozenset({"arguments"})) == clean


@FAST
@given(st.binary(max_size=300))
def test_lenient_decoding_raises_only_decode_errors(body: bytes) -> None:
    header = MARKER + codec().fingerprint_of(ToolProposal)
    with contextlib.suppress(DecodeError):
        codec().decode_lenient(header + body, ToolProposal, frozenset({"arguments"}))


# --- outputs ----------------------------------------------------------------------------------

CHARGE = registry().get("payment.charge_card", "1.0.0")


def _result(data: dict[str, object], taxonomy: TaxonomyClass = TaxonomyClass.SUCCESS, errors: int = 0) -> object:
    return results.result(
        stage_record(CHARGE).call,
        stage="execution",
        result_outcome=results.outcome(taxonomy),
        traceparent="tp",
        home_partition=0,
        now_ms=1,
        data=data,
        errors=[FieldError(field=f"f{i}", code="c", message="m" * 100) for i in range(errors)],
    )


def test_a_result_within_bounds_is_encoded_as_it_is() -> None:
    res = _result({"charge_id": "ch_1"})
    assert results.encoded(res) == codec().encode(res)  # type: ignore[arg-type]


def test_an_effect_whose_result_is_too_large_is_partial_success_with_the_data_withheld() -> None:
    res = _result({"blob": "x" * (results.MAX_RESULT_BYTES + 10)})
    out = codec().decode(results.encoded(res), type(res))  # type: ignore[arg-type]
    assert out.outcome.taxonomy_class is TaxonomyClass.PARTIAL_SUCCESS
    assert out.data["withheld"]["reason"] == "result_too_large"
    assert len(results.encoded(res)) < results.MAX_RESULT_BYTES  # type: ignore[arg-type]
    assert out.call_id == res.call_id  # type: ignore[attr-defined]


def test_a_refusal_with_thousands_of_errors_keeps_its_class_and_the_first_errors() -> None:
    res = _result({}, TaxonomyClass.TYPE_MISMATCH, errors=8000)
    out = codec().decode(results.encoded(res), type(res))  # type: ignore[arg-type]
    assert out.outcome.taxonomy_class is TaxonomyClass.TYPE_MISMATCH
    assert len(out.errors) == results.MAX_ERRORS + 1 and out.errors[-1].code == "more_errors"
    assert json.dumps(out.data)  # still a JSON object


def test_produce_errors_no_retry_cures_are_told_from_the_others() -> None:
    assert is_undeliverable(ProduceError(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)))
    assert is_undeliverable(ProduceError(KafkaError(KafkaError.TOPIC_EXCEPTION)))
    assert not is_undeliverable(ProduceError(KafkaError(KafkaError._TRANSPORT)))
    assert not is_undeliverable(ProduceError(KafkaError(KafkaError._MSG_TIMED_OUT)))
    assert not is_undeliverable(ConnectionError("broker down")) and not is_undeliverable(None)
