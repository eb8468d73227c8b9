"""The validation gates (workers/validation/decision.py), table-driven over the shipped contracts."""

from __future__ import annotations

import copy
import datetime as dt
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.factories import FAST, JSON_VALUES, TODAY, contracts, first_example, proposal, registry
from toolgate.contracts.contract import Contract
from toolgate.contracts.json_types import json_type
from toolgate.schemas.hashing import payload_hash
from toolgate.schemas.models import TaxonomyClass
from toolgate.taxonomy import GATE_ORDER
from toolgate.workers.validation import semantic
from toolgate.workers.validation.arguments import MAX_ARGUMENTS_BYTES, parse_arguments
from toolgate.workers.validation.decision import Pass, Reject, decide

Path = tuple[str | int, ...]

CANDIDATES: dict[str, Any] = {
    "null": None,
    "boolean": True,
    "integer": 7,
    "number": 1.5,
    "string": "x",
    "array": [],
    "object": {},
}


@dataclass(frozen=True)
class Case:
    id: str
    tool: str
    arguments: dict[str, Any]
    taxonomy: TaxonomyClass | None  # None: must pass
    field: str | None = None
    code: str | None = None
    expected_types: frozenset[str] | None = None
    actual: str | None = None


def dotted(path: Path) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def get_in(doc: Any, path: Path) -> Any:
    for p in path:
        doc = doc[p]
    return doc


def set_in(doc: Any, path: Path, value: Any) -> Any:
    out = copy.deepcopy(doc)
    get_in(out, path[:-1])[path[-1]] = value
    return out


def del_in(doc: Any, path: Path) -> Any:
    out = copy.deepcopy(doc)
    del get_in(out, path[:-1])[path[-1]]
    return out


def objects(schema: dict[str, Any], example: Any, path: Path = ()) -> Iterator[tuple[Path, dict[str, Any]]]:
    """(path, schema) of every object schema the example instantiates: the top level and nested
    objects, descending into the first item of arrays of objects."""
    if not isinstance(example, dict):
        return
    yield path, schema
    for name, sub in schema.get("properties", {}).items():
        if name not in example or not isinstance(sub, dict):
            continue
        if sub.get("type") == "object":
            yield from objects(sub, example[name], (*path, name))
        if sub.get("type") == "array" and isinstance(sub.get("items"), dict) and example[name]:
            yield from objects(sub["items"], example[name][0], (*path, name, 0))


def allowed_types(schema: dict[str, Any]) -> set[str] | None:
    if "type" in schema:
        kind = schema["type"]
        return {kind} if isinstance(kind, str) else set(kind)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            found: set[str] = set()
            for branch in schema[key]:
                sub = allowed_types(branch)
                if sub is None:
                    return None
                found |= sub
            return found
    return None


def is_allowed(value: Any, allowed: set[str]) -> bool:
    kind = json_type(value)
    return kind in allowed or (kind == "integer" and "number" in allowed)


def string_of_length(schema: dict[str, Any], seed: str, length: int) -> str | None:
    """A string of exactly `length` characters that satisfies the schema's pattern, if any."""
    seed = seed if isinstance(seed, str) else ""
    if len(seed) > length:
        seed = ""
    pad = length - len(seed)
    pattern = schema.get("pattern")
    for value in ("a" * pad + seed, seed + "a" * pad, "a" * length):
        if pattern is None or re.search(pattern, value):
            return value
    return None


def callable_contracts() -> list[Contract]:
    """The shipped versions a proposal may name: all but the sunsetted ones, which resolve to none."""
    return [c for c in contracts() if c.lifecycle != "sunsetted"]


def cases() -> Iterator[Case]:
    for contract in callable_contracts():
        tool = contract.name
        example = first_example(contract)
        for obj_path, obj_schema in objects(dict(contract.input_schema), example):
            where = dotted(obj_path) or "root"
            for name in obj_schema.get("required", []):
                path = (*obj_path, name)
                yield Case(
                    f"{tool}:missing:{dotted(path)}",
                    tool,
                    del_in(example, path),
                    TaxonomyClass.STRUCTURAL_VIOLATION,
                    dotted(path),
                    "missing_field",
                )
            if obj_schema.get("additionalProperties") is False:
                path = (*obj_path, "zz_unexpected")
                yield Case(
                    f"{tool}:unexpected:{where}",
                    tool,
                    set_in(example, path, "surprise"),
                    TaxonomyClass.STRUCTURAL_VIOLATION,
                    dotted(path),
                    "unexpected_field",
                )
            for name, sub in obj_schema.get("properties", {}).items():
                path = (*obj_path, name)
                field = dotted(path)
                allowed = allowed_types(sub)
                if allowed:
                    for kind, value in CANDIDATES.items():
                        if not is_allowed(value, allowed):
                            yield Case(
                                f"{tool}:wrong_type:{field}:{kind}",
                                tool,
                                set_in(example, path, value),
                                TaxonomyClass.TYPE_MISMATCH,
                                field,
                                "type_mismatch",
                                frozenset(allowed),
                                kind,
                            )
                types = allowed or set()
                if "string" in types and "maxLength" in sub:
                    top = sub["maxLength"]
                    seed = example.get(name) if obj_path == () else get_in(example, obj_path).get(name)
                    at_max = string_of_length(sub, seed, top)
                    over = string_of_length(sub, seed, top + 1)
                    if at_max is not None:
                        yield Case(f"{tool}:maxLength_ok:{field}", tool, set_in(example, path, at_max), None)
                    if over is not None:
                        yield Case(
                            f"{tool}:maxLength_over:{field}",
                            tool,
                            set_in(example, path, over),
                            TaxonomyClass.OUT_OF_BOUNDS,
                            field,
                            "out_of_bounds.maxLength",
                        )
                if "string" in types and "minLength" in sub and sub["minLength"] > 0:
                    yield Case(
                        f"{tool}:minLength_under:{field}",
                        tool,
                        set_in(example, path, ""),
                        TaxonomyClass.OUT_OF_BOUNDS,
                        field,
                        "out_of_bounds.minLength",
                    )
                if "string" in types and "pattern" in sub and not re.search(sub["pattern"], "!! no match !!"):
                    yield Case(
                        f"{tool}:pattern:{field}",
                        tool,
                        set_in(example, path, "!! no match !!"),
                        TaxonomyClass.OUT_OF_BOUNDS,
                        field,
                        "out_of_bounds.pattern",
                    )
                if "integer" in types:
                    if "minimum" in sub:
                        low = sub["minimum"]
                        yield Case(f"{tool}:minimum_ok:{field}", tool, set_in(example, path, low), None)
                        yield Case(
                            f"{tool}:minimum_under:{field}",
                            tool,
                            set_in(example, path, low - 1),
                            TaxonomyClass.OUT_OF_BOUNDS,
                            field,
                            "out_of_bounds.minimum",
                        )
                    if "maximum" in sub:
                        high = sub["maximum"]
                        yield Case(f"{tool}:maximum_ok:{field}", tool, set_in(example, path, high), None)
                        yield Case(
                            f"{tool}:maximum_over:{field}",
                            tool,
                            set_in(example, path, high + 1),
                            TaxonomyClass.OUT_OF_BOUNDS,
                            field,
                            "out_of_bounds.maximum",
                        )
                if "enum" in sub:
                    outsider = "ZZZ_NOT_IN_ENUM" if all(isinstance(v, str) for v in sub["enum"]) else -987654
                    yield Case(
                        f"{tool}:enum:{field}",
                        tool,
                        set_in(example, path, outsider),
                        TaxonomyClass.OUT_OF_BOUNDS,
                        field,
                        "out_of_bounds.enum",
                    )
                    for member in sub["enum"]:
                        yield Case(f"{tool}:enum_ok:{field}:{member}", tool, set_in(example, path, member), None)
            array_props = [(n, s) for n, s in obj_schema.get("properties", {}).items() if s.get("type") == "array"]
            for name, sub in array_props:
                path = (*obj_path, name)
                if "minItems" in sub and sub["minItems"] > 0:
                    yield Case(
                        f"{tool}:minItems:{dotted(path)}",
                        tool,
                        set_in(example, path, []),
                        TaxonomyClass.OUT_OF_BOUNDS,
                        dotted(path),
                        "out_of_bounds.minItems",
                    )
                if "maxItems" in sub and isinstance(get_in(example, path), list) and get_in(example, path):
                    items = [get_in(example, path)[0]] * (sub["maxItems"] + 1)
                    yield Case(
                        f"{tool}:maxItems:{dotted(path)}",
                        tool,
                        set_in(example, path, items),
                        TaxonomyClass.OUT_OF_BOUNDS,
                        dotted(path),
                        "out_of_bounds.maxItems",
                    )
                    items = [get_in(example, path)[0]] * sub["maxItems"]
                    yield Case(f"{tool}:maxItems_ok:{dotted(path)}", tool, set_in(example, path, items), None)


CASES = list(cases())

NUMERIC_BOUNDS = {"minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems"}


def _bound_of(case: Case) -> Any:
    contract = registry().resolve(case.tool, "latest")
    schema: Any = contract.input_schema
    for part in case.field.replace("[0]", ".[0]").split(".") if case.field else ():
        schema = schema["items"] if part == "[0]" else schema["properties"][part]
    return schema[case.code.split(".", 1)[1]] if case.code else None


def _numeric(case: Case) -> bool:
    kind = (case.code or "").removeprefix("out_of_bounds.")
    return case.taxonomy is TaxonomyClass.OUT_OF_BOUNDS and kind in NUMERIC_BOUNDS and _bound_of(case) != 0


NUMERIC_CASES = [c for c in CASES if _numeric(c)]


def test_table_covers_every_contract_and_kind() -> None:
    tools = {c.name for c in contracts()}
    assert {c.tool for c in CASES} == tools
    kinds = {c.id.split(":")[1] for c in CASES}
    assert {
        "missing",
        "unexpected",
        "wrong_type",
        "maxLength_ok",
        "maxLength_over",
        "minimum_under",
        "maximum_over",
        "enum",
    } <= kinds
    for tool in tools:  # every required field of every tool has a case
        contract = registry().resolve(tool, "latest")
        for name in contract.input_schema.get("required", []):
            assert f"{tool}:missing:{name}" in {c.id for c in CASES}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_gate(case: Case) -> None:
    check_gate(case)


def test_numeric_bound_cases_exist() -> None:
    ids = {c.id for c in NUMERIC_CASES}
    assert "payment.charge_card:minimum_under:amount_cents" in ids
    assert "payment.charge_card:maximum_over:amount_cents" in ids
    assert "notify.send_email:maxLength_over:to" in ids
    assert "invoice.create_draft:maxLength_over:memo" in ids


def check_gate(case: Case) -> None:
    decision = decide(proposal(case.tool, case.arguments), registry(), TODAY)
    if case.taxonomy is None:
        assert isinstance(decision, Pass), decision
        return
    assert isinstance(decision, Reject), decision
    assert decision.taxonomy_class is case.taxonomy, decision
    assert decision.tool_version == registry().resolve(case.tool, "latest").version
    matching = [e for e in decision.errors if e.field == case.field and e.code == case.code]
    assert matching, f"no {case.code} finding on {case.field}: {decision.errors}"
    finding = matching[0]
    assert finding.message
    if case.code == "type_mismatch":
        assert finding.expected is not None and finding.actual == case.actual
        assert set(finding.expected.split(" or ")) == case.expected_types
    if case.code and case.code.startswith("out_of_bounds."):
        assert finding.expected and finding.actual is not None
    if case.code in ("missing_field", "unexpected_field"):
        assert (finding.expected, finding.actual) in (("present", "missing"), ("absent", "present"))


@pytest.mark.parametrize("contract", callable_contracts(), ids=lambda c: c.name)
def test_every_example_passes(contract: Contract) -> None:
    for example in contract.document["affordance"]["examples"]:
        decision = decide(
            proposal(contract.name, example["arguments"], tool_version=contract.version), registry(), TODAY
        )
        assert isinstance(decision, Pass), decision
        assert decision.contract == contract
        assert decision.payload_hash.startswith("sha256:")
        assert decision.payload_hash == payload_hash(decision.arguments)
        assert bool(decision.warnings) == (contract.lifecycle == "deprecated")
        assert not list(contract.input_validator.iter_errors(decision.arguments))


@pytest.mark.parametrize(
    ("tool", "field", "default"),
    [("invoice.create_draft", "memo", None), ("notify.send_email", "invoice_id", None)],
)
def test_defaults_applied(tool: str, field: str, default: Any) -> None:
    contract = registry().resolve(tool, "latest")
    example = first_example(contract)
    assert field not in example
    decision = decide(proposal(tool, example), registry(), TODAY)
    assert isinstance(decision, Pass)
    assert field in decision.arguments and decision.arguments[field] == default
    # the hash covers the defaults: the same call with the default spelled out hashes the same
    explicit = decide(proposal(tool, {**example, field: default}), registry(), TODAY)
    assert isinstance(explicit, Pass) and explicit.payload_hash == decision.payload_hash


def test_payload_hash_ignores_key_order_and_whitespace() -> None:
    contract = registry().resolve("payment.charge_card", "latest")
    example = first_example(contract)
    a = decide(proposal(contract.name, example), registry(), TODAY)
    spaced = "{\n " + ",".join(f'"{k}" : {json.dumps(v)}' for k, v in reversed(example.items())) + "}"
    b = decide(proposal(contract.name, spaced), registry(), TODAY)
    assert isinstance(a, Pass) and isinstance(b, Pass)
    assert a.payload_hash == b.payload_hash
    c = decide(proposal(contract.name, {**example, "amount_cents": example["amount_cents"] + 1}), registry(), TODAY)
    assert isinstance(c, Pass) and c.payload_hash != a.payload_hash


# --- parsing ------------------------------------------------------------------------------

VALID = '{"invoice_id": "inv_acme0001"}'


@pytest.mark.parametrize(
    "text",
    [
        "{",
        "",
        " ",
        "{'invoice_id': 'inv_acme0001'}",
        '{"invoice_id": "inv_acme0001",}',
        "undefined",
        '{"a": 1} {"b": 2}',
        "[" * 100_000 + "]" * 100_000,
    ],
    ids=["open-brace", "empty", "blank", "single-quotes", "trailing-comma", "bare-word", "two-documents", "deep"],
)
def test_malformed_json(text: str) -> None:
    decision = decide(proposal("invoice.fetch", text), registry(), TODAY)
    assert isinstance(decision, Reject)
    assert decision.taxonomy_class is TaxonomyClass.SYNTACTIC_PARSE_FAIL
    assert [e.code for e in decision.errors] == ["invalid_json"]
    assert decision.tool_version is None


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('{"invoice_id": "inv_acme0001", "invoice_id": "inv_acme0002"}', "invoice_id"),
        ('{"invoice_id": "inv_acme0001", "x": {"k": 1, "k": 1}}', "k"),
    ],
)
def test_duplicate_keys(text: str, key: str) -> None:
    decision = decide(proposal("invoice.fetch", text), registry(), TODAY)
    assert isinstance(decision, Reject)
    assert decision.taxonomy_class is TaxonomyClass.SYNTACTIC_PARSE_FAIL
    assert [(e.code, e.field) for e in decision.errors] == [("duplicate_key", key)]


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
@pytest.mark.parametrize("template", ["{}", '{{"invoice_id": {}}}', "[{}]"])
def test_non_finite_literals(literal: str, template: str) -> None:
    decision = decide(proposal("invoice.fetch", template.format(literal)), registry(), TODAY)
    assert isinstance(decision, Reject)
    assert decision.taxonomy_class is TaxonomyClass.SYNTACTIC_PARSE_FAIL
    assert decision.errors[0].code == "invalid_json"


@pytest.mark.parametrize(
    ("text", "actual"),
    [
        ("[]", "array"),
        ('[{"invoice_id": "inv_acme0001"}]', "array"),
        ("5", "integer"),
        ("2.5", "number"),
        ('"inv_acme0001"', "string"),
        ("null", "null"),
        ("true", "boolean"),
    ],
)
def test_non_object(text: str, actual: str) -> None:
    decision = decide(proposal("invoice.fetch", text), registry(), TODAY)
    assert isinstance(decision, Reject)
    assert decision.taxonomy_class is TaxonomyClass.STRUCTURAL_VIOLATION
    assert [(e.code, e.expected, e.actual) for e in decision.errors] == [("not_an_object", "object", actual)]
    assert decision.tool_version == "1.0.0"


def test_too_large() -> None:
    text = json.dumps({"invoice_id": "inv_acme0001", "pad": "x" * MAX_ARGUMENTS_BYTES})
    decision = decide(proposal("invoice.fetch", text), registry(), TODAY)
    assert isinstance(decision, Reject)
    assert decision.taxonomy_class is TaxonomyClass.OUT_OF_BOUNDS
    assert decision.errors[0].code == "too_large"


def test_size_limit_counts_bytes_not_characters() -> None:
    text = '{"s": "' + "é" * (MAX_ARGUMENTS_BYTES // 2) + '"}'  # fewer characters than the limit, more bytes
    assert len(text) < MAX_ARGUMENTS_BYTES < len(text.encode())
    _, error = parse_arguments(text)
    assert error is not None and error.code == "too_large"


# --- resolution ---------------------------------------------------------------------------


def test_unknown_tool() -> None:
    decision = decide(proposal("no.such_tool", VALID), registry(), TODAY)
    assert isinstance(decision, Reject)
    assert decision.taxonomy_class is TaxonomyClass.STRUCTURAL_VIOLATION
    assert [(e.field, e.code) for e in decision.errors] == [("tool_name", "unknown_tool")]


@pytest.mark.parametrize(
    ("spec", "code"),
    [
        ("9.9.9", "unknown_version"),
        ("9.x", "unknown_version"),
        ("banana", "bad_version_spec"),
        ("1.0", "bad_version_spec"),
        ("v1.0.0", "bad_version_spec"),
        ("01.0.0", "bad_version_spec"),
        ("", "bad_version_spec"),
        ("LATEST", "bad_version_spec"),
    ],
)
def test_unresolvable_version(spec: str, code: str) -> None:
    decision = decide(proposal("invoice.fetch", VALID, tool_version=spec), registry(), TODAY)
    assert isinstance(decision, Reject)
    assert decision.taxonomy_class is TaxonomyClass.STRUCTURAL_VIOLATION
    assert [(e.field, e.code) for e in decision.errors] == [("tool_version", code)]


@pytest.mark.parametrize("spec", ["1.0.0", "1.x", "latest"])
def test_resolvable_version(spec: str) -> None:
    decision = decide(proposal("invoice.fetch", VALID, tool_version=spec), registry(), TODAY)
    assert isinstance(decision, Pass)
    assert decision.contract.version == "1.0.0"


def test_parse_failure_is_reported_before_resolution() -> None:
    decision = decide(proposal("no.such_tool", "{"), registry(), TODAY)
    assert isinstance(decision, Reject) and decision.taxonomy_class is TaxonomyClass.SYNTACTIC_PARSE_FAIL


def test_several_findings_name_the_earliest_gate_and_list_all() -> None:
    args = {"invoice_id": "bad", "amount_cents": "ten", "zz": 1}  # bounds, type, structure; currency missing
    decision = decide(proposal("payment.charge_card", args), registry(), TODAY)
    assert isinstance(decision, Reject)
    assert decision.taxonomy_class is TaxonomyClass.STRUCTURAL_VIOLATION
    codes = [e.code for e in decision.errors]
    assert {"missing_field", "unexpected_field", "type_mismatch", "out_of_bounds.pattern"} <= set(codes)
    order = [
        GATE_ORDER.index(t)
        for t in (TaxonomyClass.STRUCTURAL_VIOLATION, TaxonomyClass.TYPE_MISMATCH, TaxonomyClass.OUT_OF_BOUNDS)
    ]
    assert order == sorted(order)
    assert codes.index("type_mismatch") > codes.index("missing_field")
    assert codes.index("out_of_bounds.pattern") > codes.index("type_mismatch")


@pytest.mark.parametrize("escape", ["\\ud800", "a\\udc00b"])
def test_lone_surrogate_is_rejected_not_raised(escape: str) -> None:
    example = first_example(registry().resolve("notify.send_email", "latest"))
    text = json.dumps({**example, "subject": "@@"}).replace('"@@"', f'"{escape}"')
    decision = decide(proposal("notify.send_email", text), registry(), TODAY)
    assert isinstance(decision, Reject)
    assert decision.taxonomy_class in GATE_ORDER


# --- totality -----------------------------------------------------------------------------

TOOLS = [c.name for c in contracts()]


def _check_total(tool: str, text: str) -> None:
    decision = decide(proposal(tool, text), registry(), TODAY)
    assert isinstance(decision, Pass | Reject)
    if isinstance(decision, Reject):
        assert decision.taxonomy_class in GATE_ORDER
        assert decision.errors
        for error in decision.errors:
            assert error.code and error.message
    else:
        assert not list(decision.contract.input_validator.iter_errors(decision.arguments))
        assert decision.payload_hash == payload_hash(decision.arguments)
        # the semantic gate after it is total too, whatever the facts say
        for finding in semantic.findings(decision.arguments, decision.contract, {}, dt.date(2026, 11, 22), "acme"):
            assert finding.code.startswith("semantic.") and finding.message


@FAST
@given(tool=st.sampled_from(TOOLS), text=st.text())
def test_arbitrary_text_never_raises(tool: str, text: str) -> None:
    _check_total(tool, text)


@FAST
@given(tool=st.sampled_from(TOOLS), value=JSON_VALUES)
def test_arbitrary_json_never_raises(tool: str, value: Any) -> None:
    _check_total(tool, json.dumps(value))


@FAST
@given(tool=st.sampled_from(TOOLS), data=st.binary(max_size=300))
def test_arbitrary_bytes_never_raise(tool: str, data: bytes) -> None:
    # bytes that are not UTF-8 stay in the string as lone surrogates, as a lenient decoder would leave them
    _check_total(tool, data.decode("utf-8", errors="surrogateescape"))


@st.composite
def near_valid(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """Objects built from a tool's own property names, with the example's values or arbitrary ones."""
    contract = draw(st.sampled_from(contracts()))
    example = first_example(contract)
    names = [*contract.input_schema.get("properties", {}), "zz_extra"]
    value = st.one_of(st.sampled_from([*example.values(), None]), JSON_VALUES)
    return contract.name, draw(st.dictionaries(st.sampled_from(names), value, max_size=len(names)))


@settings(FAST, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(near_valid())
def test_near_valid_objects_never_raise(case: tuple[str, dict[str, Any]]) -> None:
    tool, arguments = case
    _check_total(tool, json.dumps(arguments))
