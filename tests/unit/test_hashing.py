"""Payload hashes and idempotency keys (schemas/hashing.py)."""

from __future__ import annotations

import hashlib
import itertools
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.unit.factories import FAST, FAST_FEW, changed, registry, stage_record
from toolgate.schemas.hashing import (
    derive_idempotency_key,
    fingerprint,
    idempotency_key_for,
    payload_hash,
    provider_key,
    request_hash,
)
from toolgate.schemas.models import StageRecord
from toolgate.schemas.wire import canonical_json

FIELDS = [
    "workflow_id",
    "run_id",
    "tenant_id",
    "user_id",
    "tool_name",
    "tool_version",
    "logical_operation_id",
    "payload_hash",
]
BASE = {f: f"{f}-value" for f in FIELDS}

# JSON without floats: RFC 8785 number formatting is exercised separately
INT_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | st.text(max_size=8),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=6), c, max_size=4),
    max_leaves=15,
)


def test_payload_hash_format() -> None:
    h = payload_hash({"a": 1})
    assert h.startswith("sha256:") and len(h) == len("sha256:") + 64
    assert h == "sha256:" + hashlib.sha256(b'{"a":1}').hexdigest()


def test_payload_hash_stable_across_key_order() -> None:
    a = {"b": 1, "a": [1, {"y": 2, "x": 3}], "c": None}
    b = {"c": None, "a": [1, {"x": 3, "y": 2}], "b": 1}
    assert payload_hash(a) == payload_hash(b)


def test_payload_hash_distinguishes_array_order_and_types() -> None:
    assert payload_hash({"a": [1, 2]}) != payload_hash({"a": [2, 1]})
    assert payload_hash({"a": 1}) != payload_hash({"a": "1"})
    assert payload_hash({"a": None}) != payload_hash({})
    assert payload_hash({"a": True}) != payload_hash({"a": 1})


def test_payload_hash_numbers_follow_rfc8785() -> None:
    assert payload_hash({"a": 1.0}) == payload_hash({"a": 1})  # the same JSON number
    assert payload_hash({"a": 1e21}) == "sha256:" + hashlib.sha256(b'{"a":1e+21}').hexdigest()


@FAST_FEW
@given(value=st.dictionaries(st.text(max_size=8), INT_JSON, max_size=6))
def test_payload_hash_equal_for_equal_json(value: dict[str, Any]) -> None:
    reparsed = json.loads(json.dumps(value, indent=1, sort_keys=False))
    shuffled = dict(reversed(list(value.items())))
    assert payload_hash(value) == payload_hash(reparsed) == payload_hash(shuffled)
    assert json.loads(canonical_json(value)) == value


@FAST_FEW
@given(
    a=st.dictionaries(st.text(max_size=4), INT_JSON, max_size=3),
    b=st.dictionaries(st.text(max_size=4), INT_JSON, max_size=3),
)
def test_payload_hash_differs_for_different_json(a: dict[str, Any], b: dict[str, Any]) -> None:
    def same(x: Any, y: Any) -> bool:  # JSON equality: True is not 1
        return json.dumps(x, sort_keys=True) == json.dumps(y, sort_keys=True)

    assert (payload_hash(a) == payload_hash(b)) == same(a, b)


@pytest.mark.parametrize("field", FIELDS)
def test_derived_key_changes_with_every_input(field: str) -> None:
    assert derive_idempotency_key(**BASE) != derive_idempotency_key(**{**BASE, field: BASE[field] + "x"})


def test_derived_key_is_deterministic_and_prefixed() -> None:
    key = derive_idempotency_key(**BASE)
    assert key == derive_idempotency_key(**dict(reversed(list(BASE.items()))))
    assert key.startswith("tg_") and len(key) == 3 + 64


@pytest.mark.parametrize(("first", "second"), list(itertools.pairwise(FIELDS)))
def test_derived_key_has_no_concatenation_ambiguity(first: str, second: str) -> None:
    a = derive_idempotency_key(**{**BASE, first: "ab", second: "c"})
    b = derive_idempotency_key(**{**BASE, first: "a", second: "bc"})
    c = derive_idempotency_key(**{**BASE, first: "abc", second: ""})
    assert len({a, b, c}) == 3


def test_derived_key_distinguishes_fields_swapped() -> None:
    a = derive_idempotency_key(**{**BASE, "run_id": "x", "workflow_id": "y"})
    b = derive_idempotency_key(**{**BASE, "run_id": "y", "workflow_id": "x"})
    assert a != b


@FAST
@given(
    parts=st.lists(st.text(max_size=6), min_size=8, max_size=8),
    other=st.lists(st.text(max_size=6), min_size=8, max_size=8),
)
def test_derived_key_injective_on_samples(parts: list[str], other: list[str]) -> None:
    a = derive_idempotency_key(**dict(zip(FIELDS, parts, strict=True)))
    b = derive_idempotency_key(**dict(zip(FIELDS, other, strict=True)))
    assert (a == b) == (parts == other)


def test_idempotency_key_prefers_callers_key() -> None:
    contract = registry().resolve("invoice.fetch", "latest")
    record = stage_record(contract, idempotency_key="my-own-key")
    assert key_of(record, "my-own-key") == "my-own-key" == record.call.idempotency_key


def test_idempotency_key_derived_without_callers_key() -> None:
    contract = registry().resolve("invoice.fetch", "latest")
    for given_key in (None, ""):
        record = stage_record(contract, idempotency_key=given_key)
        assert (
            key_of(record, given_key)
            == record.call.idempotency_key
            == derive_idempotency_key(
                workflow_id=record.call.workflow_id,
                run_id=record.call.run_id,
                tenant_id=record.call.tenant_id,
                user_id=record.call.principal.user_id,
                tool_name=record.call.tool_name,
                tool_version=record.call.tool_version,
                logical_operation_id=record.call.logical_operation_id,
                payload_hash=record.call.payload_hash,
            )
        )


def test_derived_key_ignores_incidental_fields() -> None:
    contract = registry().resolve("invoice.fetch", "latest")
    a = stage_record(contract, call_id="call_1", traceparent="00-" + "1" * 32 + "-" + "1" * 16 + "-01", attempt=1)
    b = stage_record(contract, call_id="call_2", traceparent="00-" + "2" * 32 + "-" + "2" * 16 + "-01", attempt=4)
    assert key_of(a) == key_of(b)
    assert key_of(a) != key_of(stage_record(contract, payload_hash="sha256:other"))


def test_fingerprint() -> None:
    assert fingerprint("abc") == hashlib.sha256(b"abc").hexdigest()[:12]
    assert len(fingerprint("abc", 24)) == 24


@pytest.mark.parametrize(
    "change", [{"tenant_id": "globex"}, {"tool_name": "invoice.void_draft"}, {"tool_version": "1.1.0"}]
)
def test_a_key_is_bound_to_its_tenant_tool_and_version_not_only_its_arguments(change: dict[str, str]) -> None:
    # The same key and arguments on another tool or version is another request: a mismatch, never a replay.
    record = stage_record(registry().get("invoice.fetch", "1.0.0"))
    assert bound(record) != bound(changed(record, **change))
    assert bound(record) == bound(changed(record, call_id="call_other"))


def key_of(record: StageRecord, caller_key: str | None = None) -> str:
    """The key validation derives for the call `record` carries."""
    return idempotency_key_for(caller_key, record.call.__dict__, record.call.principal.user_id)


def bound(record: StageRecord) -> str:
    """The request hash validation derives for the call `record` carries."""
    c = record.call
    return request_hash(c.tenant_id, c.tool_name, c.tool_version, c.payload_hash)


def test_a_provider_sees_a_key_no_tenant_shares_and_no_url_misreads() -> None:
    mine, theirs = (provider_key(t, "payment.charge_card", "1.0.0", "k-1") for t in ("acme", "globex"))
    assert mine != theirs
    assert provider_key("acme", "payment.charge_card", "1.0.1", "k-1") != mine
    assert mine.startswith("tgk_") and mine[4:].isalnum()
