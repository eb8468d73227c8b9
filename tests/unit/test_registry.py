"""The contract registry (contracts/registry.py): admission, loading, version resolution."""

from __future__ import annotations

import copy
import datetime as dt
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.unit.factories import TODAY, contracts, first_example, proposal, registry
from toolgate.contracts.admission import ContractRefused, admit
from toolgate.contracts.contract import Contract, parse_version
from toolgate.contracts.registry import Registry, Resolution, load_documents, load_registry
from toolgate.schemas.models import TaxonomyClass
from toolgate.workers.validation.decision import Pass, Reject, decide, deprecation_warnings

SHIPPED = Path(contracts()[0].source).parent.parent


def document(name: str = "invoice.fetch") -> dict[str, Any]:
    return json.loads((SHIPPED / name / "1.0.0.json").read_text())


def with_version(doc: dict[str, Any], version: str, status: str = "active", **lifecycle: Any) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    doc["contract"]["identity"]["version"] = version
    doc["contract"]["identity"]["lifecycle"] = {"status": status, "sunset_date": None, "replacement": None, **lifecycle}
    return doc


def registry_of(*docs: dict[str, Any]) -> Registry:
    return Registry(admit(d, f"test:{i}") for i, d in enumerate(docs))


# --- shipped -----------------------------------------------------------------------------


def test_shipped_contracts() -> None:
    assert registry().names() == [
        "invoice.create_draft",
        "invoice.fetch",
        "invoice.tax_estimate",
        "invoice.void_draft",
        "notify.publish_announcement",
        "notify.retract_announcement",
        "notify.send_bulk",
        "notify.send_email",
        "payment.charge_card",
    ]
    for c in contracts():
        assert Path(c.source).parent.name == c.name and Path(c.source).stem == c.version


@pytest.mark.parametrize("spec", ["1.0.0", "1.x", "latest"])
def test_shipped_resolution(spec: str) -> None:
    assert registry().resolve("invoice.fetch", spec).version == "1.0.0"


def test_load_registry_with_extra_dir(tmp_path: Path) -> None:
    (tmp_path / "invoice.fetch").mkdir()
    (tmp_path / "invoice.fetch" / "1.2.0.json").write_text(json.dumps(with_version(document(), "1.2.0")))
    reg = load_registry(tmp_path)
    assert reg.resolve("invoice.fetch", "latest").version == "1.2.0"
    assert reg.resolve("invoice.fetch", "1.0.0").version == "1.0.0"


def test_duplicate_version_refused(tmp_path: Path) -> None:
    (tmp_path / "invoice.fetch").mkdir()
    (tmp_path / "invoice.fetch" / "1.0.0.json").write_text(json.dumps(document()))
    with pytest.raises(ContractRefused, match="duplicate"):
        load_registry(tmp_path)


# --- resolution ---------------------------------------------------------------------------


def test_resolution_exact_major_latest() -> None:
    base = document()
    reg = registry_of(*(with_version(base, v) for v in ("1.0.0", "1.2.0", "1.10.0", "2.0.0", "2.1.3", "10.0.0")))
    assert reg.resolve("invoice.fetch", "1.2.0").version == "1.2.0"
    assert reg.resolve("invoice.fetch", "1.x").version == "1.10.0"  # numeric, not lexicographic
    assert reg.resolve("invoice.fetch", "2.x").version == "2.1.3"
    assert reg.resolve("invoice.fetch", "latest").version == "10.0.0"
    for spec, code in (
        ("3.x", "unknown_version"),
        ("1.2.1", "unknown_version"),
        ("1.2", "bad_version_spec"),
        ("x", "bad_version_spec"),
        ("Latest", "bad_version_spec"),
        ("1.X", "bad_version_spec"),
    ):
        with pytest.raises(Resolution) as info:
            reg.resolve("invoice.fetch", spec)
        assert (info.value.code, info.value.field) == (code, "tool_version"), spec


def test_unknown_tool() -> None:
    with pytest.raises(Resolution) as info:
        registry().resolve("nope", "latest")
    assert (info.value.code, info.value.field) == ("unknown_tool", "tool_name")


def test_deprecated_version() -> None:
    base = document()
    reg = registry_of(
        with_version(base, "1.0.0"),
        with_version(base, "1.1.0", "deprecated", sunset_date="2030-01-01", replacement="invoice.fetch 1.0.0"),
    )
    assert reg.resolve("invoice.fetch", "latest").version == "1.0.0"
    assert reg.resolve("invoice.fetch", "1.x").version == "1.0.0"
    deprecated = reg.resolve("invoice.fetch", "1.1.0")
    assert deprecated.version == "1.1.0" and deprecated.lifecycle == "deprecated"
    (warning,) = deprecation_warnings(deprecated)
    assert "deprecated" in warning and "2030-01-01" in warning and "invoice.fetch 1.0.0" in warning
    assert deprecation_warnings(reg.resolve("invoice.fetch", "1.0.0")) == ()
    # the warning travels with the validation decision
    decision = decide(proposal("invoice.fetch", {"invoice_id": "inv_acme0001"}, tool_version="1.1.0"), reg, TODAY)
    assert isinstance(decision, Pass) and decision.warnings == (warning,)


def test_a_deprecated_version_runs_until_its_sunset_date_and_then_is_refused_naming_its_replacement() -> None:
    base = document()
    reg = registry_of(
        with_version(base, "1.0.0"),
        with_version(base, "1.1.0", "deprecated", sunset_date="2026-11-15", replacement="invoice.fetch@1.0.0"),
    )
    call = proposal("invoice.fetch", {"invoice_id": "inv_acme0001"}, tool_version="1.1.0")
    assert isinstance(decide(call, reg, dt.date(2026, 11, 14)), Pass)
    for day in (dt.date(2026, 11, 15), dt.date(2027, 1, 1)):
        refused = decide(call, reg, day)
        assert isinstance(refused, Reject) and refused.taxonomy_class is TaxonomyClass.STRUCTURAL_VIOLATION
        (error,) = refused.errors
        assert (error.field, error.code, error.expected) == ("tool_version", "version_sunsetted", "invoice.fetch@1.0.0")
        assert error.message == "invoice.fetch 1.1.0 was sunset on 2026-11-15; use invoice.fetch@1.0.0"
    # without a date it is only deprecated: it runs, with its warning
    undated = registry_of(with_version(base, "1.1.0", "deprecated"))
    assert isinstance(decide(call, undated, dt.date(2099, 1, 1)), Pass)


def test_a_sunset_date_that_is_no_date_is_refused() -> None:
    said = "identity.lifecycle.sunset_date of invoice.fetch 1.1.0: '2026-13-01' is not a date"
    with pytest.raises(ContractRefused, match=re.escape(said)):
        registry_of(with_version(document(), "1.1.0", "deprecated", sunset_date="2026-13-01"))


def test_deprecated_without_sunset_date_warns() -> None:
    reg = registry_of(with_version(document(), "1.1.0", "deprecated"))
    (warning,) = deprecation_warnings(reg.resolve("invoice.fetch", "1.1.0"))
    assert "to be announced" in warning


def test_only_deprecated_versions_do_not_resolve_by_spec() -> None:
    reg = registry_of(with_version(document(), "1.1.0", "deprecated"))
    for spec in ("latest", "1.x"):
        with pytest.raises(Resolution) as info:
            reg.resolve("invoice.fetch", spec)
        assert info.value.code == "unknown_version"


def test_sunsetted_version() -> None:
    base = document()
    reg = registry_of(with_version(base, "1.0.0"), with_version(base, "1.1.0", "sunsetted", sunset_date="2024-01-01"))
    with pytest.raises(Resolution) as info:
        reg.resolve("invoice.fetch", "1.1.0")
    assert (info.value.code, info.value.field) == ("version_sunsetted", "tool_version")
    assert str(info.value) == "invoice.fetch 1.1.0 was sunset on 2024-01-01"
    assert reg.resolve("invoice.fetch", "latest").version == "1.0.0"


# --- admission ----------------------------------------------------------------------------


def test_every_shipped_document_is_admitted() -> None:
    for c in contracts():
        again = admit(json.loads(Path(c.source).read_text()), "again")
        assert again == c


@pytest.mark.parametrize(
    "field",
    [
        "identity",
        "affordance",
        "runtime",
        "security",
        "transactional",
        "idempotency",
        "observability",
        "error_contract",
    ],
)
def test_missing_reference_section_refused(field: str) -> None:
    doc = document()
    del doc["contract"][field]
    with pytest.raises(ContractRefused, match=field):
        admit(doc, "test")


@pytest.mark.parametrize(
    ("section", "field"),
    [
        ("identity", "owner"),
        ("identity", "lifecycle"),
        ("affordance", "examples"),
        ("affordance", "input_schema"),
        ("security", "required_scopes"),
        ("transactional", "side_effect_class"),
        ("runtime", "timeout_ms"),
    ],
)
def test_missing_reference_field_refused(section: str, field: str) -> None:
    doc = document()
    del doc["contract"][section][field]
    with pytest.raises(ContractRefused, match=field):
        admit(doc, "test")


@pytest.mark.parametrize(
    "mutate",
    [
        lambda b: b.pop("executor"),
        lambda b: b.pop("timeout_class"),
        lambda b: b["executor"].update(kind="ftp"),
        lambda b: b.update(unexpected=True),
        lambda b: b["executor"].pop("statement"),
    ],
    ids=["no-executor", "no-timeout-class", "bad-kind", "extra-key", "no-statement"],
)
def test_invalid_binding_refused(mutate: Any) -> None:
    doc = document()
    mutate(doc["binding"])
    with pytest.raises(ContractRefused, match="binding"):
        admit(doc, "test")


def test_document_shape_refused() -> None:
    with pytest.raises(ContractRefused):
        admit({"contract": document()["contract"]}, "test")
    with pytest.raises(ContractRefused):
        admit({**document(), "extra": {}}, "test")


@pytest.mark.parametrize("arguments", [{}, {"invoice_id": "not-an-invoice"}, {"invoice_id": "inv_acme0001", "x": 1}])
def test_example_violating_input_schema_refused(arguments: dict[str, Any]) -> None:
    doc = document()
    doc["contract"]["affordance"]["examples"].append({"description": "bad", "arguments": arguments})
    with pytest.raises(ContractRefused, match="example 1"):
        admit(doc, "test")


@pytest.mark.parametrize("which", ["input_schema", "output_schema"])
@pytest.mark.parametrize(
    "schema",
    [{"type": "banana"}, {"type": "object", "required": "invoice_id"}, {"properties": {"a": {"minLength": -1}}}],
)
def test_schema_that_is_not_json_schema_refused(which: str, schema: dict[str, Any]) -> None:
    doc = document()
    doc["contract"]["affordance"][which] = schema
    with pytest.raises(ContractRefused, match="not a JSON Schema"):
        admit(doc, "test")


@pytest.mark.parametrize("version", ["1.0", "v1.0.0", "01.0.0", "1.0.0-rc1", "latest"])
def test_bad_version_refused(version: str) -> None:
    doc = with_version(document(), version)
    with pytest.raises(ContractRefused):
        admit(doc, "test")


def test_parse_version() -> None:
    assert parse_version("10.2.33") == (10, 2, 33)
    with pytest.raises(ValueError):
        parse_version("1.2")


# --- loading from a directory -------------------------------------------------------------


def _write(root: Path, rel: str, doc: Any) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))


def test_load_documents(tmp_path: Path) -> None:
    _write(tmp_path, "invoice.fetch/1.0.0.json", document())
    _write(tmp_path, "notify.send_email/1.0.0.json", document("notify.send_email"))
    loaded = load_documents(tmp_path)
    assert sorted((c.name, c.version) for c in loaded) == [("invoice.fetch", "1.0.0"), ("notify.send_email", "1.0.0")]


@pytest.mark.parametrize("rel", ["invoice.get/1.0.0.json", "invoice.fetch/1.0.1.json", "notify.send_email/1.0.0.json"])
def test_path_must_match_name_and_version(tmp_path: Path, rel: str) -> None:
    _write(tmp_path, rel, document())
    with pytest.raises(ContractRefused, match=r"file path must be invoice\.fetch/1\.0\.0\.json"):
        load_documents(tmp_path)


def test_not_json_refused(tmp_path: Path) -> None:
    _write(tmp_path, "invoice.fetch/1.0.0.json", "{ not json")
    with pytest.raises(ContractRefused, match="not JSON"):
        load_documents(tmp_path)


def test_contract_properties() -> None:
    c: Contract = registry().resolve("payment.charge_card", "latest")
    assert c.is_mutation and c.required_approvals == 2 and c.required_scopes == ("payments:charge",)
    assert (
        c.timeout_ms > 0
        and c.max_retries >= 0
        and c.idempotency_ttl_seconds == c.document["idempotency"]["ttl_seconds"]
    )
    fetch = registry().resolve("invoice.fetch", "latest")
    assert not fetch.is_mutation and fetch.required_approvals == 0 and fetch.approval == {}


@pytest.mark.parametrize("text", ["null", "5", "[{}]"])
def test_non_object_document_refused(tmp_path: Path, text: str) -> None:
    _write(tmp_path, "invoice.fetch/1.0.0.json", text)
    with pytest.raises(ContractRefused):
        load_documents(tmp_path)


def test_a_stage_compiles_every_contract_s_validators_as_it_starts() -> None:
    contracts_ = registry()
    contracts_.compile_validators()
    for contract in contracts_:
        assert {"_fast_input", "_fast_output"} <= set(vars(contract)), contract.name
        # A copy: the compiled validator fills the schema's defaults into what it is given.
        assert contract.accepts_input(first_example(contract))
        assert not contract.accepts_input({"not": "an argument"})
