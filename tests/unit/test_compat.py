"""Contract version compatibility (contracts/compat.py), the model-facing export (contracts/export.py)
and `toolgate contracts` (cli/contracts.py), over the shipped contracts."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from toolgate.cli.contracts import contracts_app
from toolgate.contracts.admission import admit
from toolgate.contracts.compat import Report, check, check_registry, document
from toolgate.contracts.export import MODEL_NAME, NOTE, export, export_document, model_name
from toolgate.contracts.registry import Registry, load_registry
from toolgate.workers.validation.decision import deprecation_warnings

SHIPPED = load_registry()
DRAFT, CHARGE = "invoice.create_draft", "payment.charge_card"

Edit = Callable[[dict[str, Any]], None]


def derive(tool: str, version: str, *edits: Edit, **lifecycle: Any) -> dict[str, Any]:
    """The shipped active 1.x of `tool` under another version, with `edits` applied to its contract
    section; admitted, so every derived document is a valid contract."""
    derived = copy.deepcopy(document(SHIPPED.resolve(tool, "1.x")))
    derived["contract"]["identity"]["version"] = version
    derived["contract"]["identity"]["lifecycle"].update(lifecycle)
    for edit in edits:
        edit(derived["contract"])
    admit(derived, f"test:{tool}@{version}")
    return derived


def inp(c: dict[str, Any]) -> dict[str, Any]:
    return c["affordance"]["input_schema"]  # type: ignore[no-any-return]


def out(c: dict[str, Any]) -> dict[str, Any]:
    return c["affordance"]["output_schema"]  # type: ignore[no-any-return]


def line(c: dict[str, Any]) -> dict[str, Any]:
    return inp(c)["properties"]["lines"]["items"]  # type: ignore[no-any-return]


def example(c: dict[str, Any]) -> dict[str, Any]:
    return c["affordance"]["examples"][0]["arguments"]  # type: ignore[no-any-return]


def prop(name: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda c: inp(c)["properties"][name]  # type: ignore[no-any-return]


def line_prop(name: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda c: line(c)["properties"][name]  # type: ignore[no-any-return]


def out_prop(name: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda c: out(c)["properties"][name]  # type: ignore[no-any-return]


def set_keyword(where: Callable[[dict[str, Any]], dict[str, Any]], key: str, value: Any) -> Edit:
    return lambda c: where(c).__setitem__(key, value)


def drop_keyword(where: Callable[[dict[str, Any]], dict[str, Any]], key: str) -> Edit:
    return lambda c: where(c).__delitem__(key)


def no_edit(c: dict[str, Any]) -> None:
    return None


def add_required_po(c: dict[str, Any]) -> None:
    inp(c)["properties"]["po_number"] = {"type": "string"}
    inp(c)["required"].append("po_number")
    example(c)["po_number"] = "PO-1"


def add_required_po_with_default(c: dict[str, Any]) -> None:
    add_required_po(c)
    inp(c)["properties"]["po_number"]["default"] = "none"


def add_optional_po(c: dict[str, Any]) -> None:
    inp(c)["properties"]["po_number"] = {"type": "string", "maxLength": 64}


def remove_memo(c: dict[str, Any]) -> None:
    del inp(c)["properties"]["memo"]


def rename_due_date(c: dict[str, Any]) -> None:
    inp(c)["properties"]["due_on"] = inp(c)["properties"].pop("due_date")
    inp(c)["required"] = [("due_on" if r == "due_date" else r) for r in inp(c)["required"]]
    example(c)["due_on"] = example(c).pop("due_date")


def remove_output_currency(c: dict[str, Any]) -> None:
    del out(c)["properties"]["currency"]
    out(c)["required"].remove("currency")


def add_output_field(c: dict[str, Any]) -> None:
    out(c)["properties"]["created_at"] = {"type": "string"}
    out(c)["required"].append("created_at")


def lines_via_defs(c: dict[str, Any]) -> None:
    """The line item schema moved into $defs, referenced with $ref."""
    inp(c)["$defs"] = {"line": inp(c)["properties"]["lines"].pop("items")}
    inp(c)["properties"]["lines"]["items"] = {"$ref": "#/$defs/line"}


def transactional(key: str, value: Any) -> Edit:
    return lambda c: c["transactional"].__setitem__(key, value)


IN, OUT = "input_schema/properties", "output_schema/properties"
LINE = f"{IN}/lines/items/properties"

# (id, tool, edit of the old version, edit of the new version, the rule, its path): each edit applies
# to the shipped 1.0.0 of `tool`, for the old and the new version independently.
BREAKING: list[tuple[str, str, Edit, Edit, str, str]] = [
    ("required input field added", DRAFT, no_edit, add_required_po, "input.required_added", f"{IN}/po_number"),
    (
        # toolgate validates before it fills in defaults: unlike the seeds' formal check, still breaking
        "required input field with a default added",
        DRAFT,
        no_edit,
        add_required_po_with_default,
        "input.required_added",
        f"{IN}/po_number",
    ),
    ("input field removed", DRAFT, no_edit, remove_memo, "input.property_removed", f"{IN}/memo"),
    ("input field renamed", DRAFT, no_edit, rename_due_date, "input.property_removed", f"{IN}/due_date"),
    ("input field renamed (required)", DRAFT, no_edit, rename_due_date, "input.required_added", f"{IN}/due_on"),
    (
        "input type changed",
        DRAFT,
        no_edit,
        set_keyword(prop("memo"), "type", ["integer", "null"]),
        "input.type_changed",
        f"{IN}/memo/type",
    ),
    (
        "input type narrowed",
        DRAFT,
        no_edit,
        set_keyword(prop("memo"), "type", "string"),
        "input.type_narrowed",
        f"{IN}/memo/type",
    ),
    (
        "maximum tightened",
        CHARGE,
        no_edit,
        set_keyword(prop("amount_cents"), "maximum", 1_000_000),
        "input.bound_tightened",
        f"{IN}/amount_cents/maximum",
    ),
    (
        "maxLength tightened",
        DRAFT,
        no_edit,
        set_keyword(line_prop("description"), "maxLength", 100),
        "input.bound_tightened",
        f"{LINE}/description/maxLength",
    ),
    (
        "minimum raised",
        DRAFT,
        no_edit,
        set_keyword(line_prop("unit_amount_cents"), "minimum", 100),
        "input.bound_tightened",
        f"{LINE}/unit_amount_cents/minimum",
    ),
    (
        "maxItems tightened",
        DRAFT,
        no_edit,
        set_keyword(prop("lines"), "maxItems", 10),
        "input.bound_tightened",
        f"{IN}/lines/maxItems",
    ),
    (
        "enum value removed",
        CHARGE,
        no_edit,
        set_keyword(prop("currency"), "enum", ["USD", "EUR"]),
        "input.enum_narrowed",
        f"{IN}/currency/enum",
    ),
    (
        "additionalProperties closed",
        DRAFT,
        drop_keyword(line, "additionalProperties"),
        no_edit,
        "input.additional_properties_closed",
        f"{IN}/lines/items/additionalProperties",
    ),
    (
        "pattern changed",
        DRAFT,
        no_edit,
        set_keyword(prop("customer_id"), "pattern", "^cust_[a-z0-9]{4,16}$"),
        "input.pattern_changed",
        f"{IN}/customer_id/pattern",
    ),
    (
        "format added",
        DRAFT,
        no_edit,
        set_keyword(prop("due_date"), "format", "date"),
        "input.format_added",
        f"{IN}/due_date/format",
    ),
    (
        "const added",
        CHARGE,
        no_edit,
        set_keyword(prop("currency"), "const", "USD"),
        "input.const_added",
        f"{IN}/currency/const",
    ),
    (
        "default changed",
        DRAFT,
        no_edit,
        set_keyword(prop("memo"), "default", "n/a"),
        "input.default_changed",
        f"{IN}/memo/default",
    ),
    (
        "tightened under $defs",
        DRAFT,
        lines_via_defs,
        lambda c: (lines_via_defs(c), inp(c)["$defs"]["line"]["properties"]["quantity"].__setitem__("maximum", 100)),
        "input.bound_tightened",
        "input_schema/$defs/line/properties/quantity/maximum",
    ),
    (
        "anyOf introduced",
        DRAFT,
        no_edit,
        set_keyword(prop("memo"), "anyOf", [{"type": "string"}, {"type": "null"}]),
        "input.unanalyzed_change",
        f"{IN}/memo/anyOf",
    ),
    ("output field removed", DRAFT, no_edit, remove_output_currency, "output.property_removed", f"{OUT}/currency"),
    (
        "output field no longer required",
        DRAFT,
        no_edit,
        lambda c: out(c)["required"].remove("amount_cents"),
        "output.required_removed",
        f"{OUT}/amount_cents",
    ),
    (
        "output type widened",
        DRAFT,
        no_edit,
        set_keyword(out_prop("amount_cents"), "type", "number"),
        "output.type_widened",
        f"{OUT}/amount_cents/type",
    ),
    (
        "output value set widened",
        DRAFT,
        no_edit,
        lambda c: out(c)["properties"].__setitem__("status", {"enum": ["draft", "open"]}),
        "output.const_removed",
        f"{OUT}/status/const",
    ),
    (
        "output bound removed",
        DRAFT,
        set_keyword(out_prop("invoice_id"), "maxLength", 64),
        no_edit,
        "output.bound_relaxed",
        f"{OUT}/invoice_id/maxLength",
    ),
    (
        "side-effect class riskier",
        DRAFT,
        no_edit,
        transactional("side_effect_class", "HIGH_RISK_EXTERNAL"),
        "behavior.side_effect_class_riskier",
        "transactional/side_effect_class",
    ),
    (
        "semantics changed",
        DRAFT,
        no_edit,
        transactional("semantics", "compensable_write"),
        "behavior.semantics_changed",
        "transactional/semantics",
    ),
    (
        "required scope added",
        DRAFT,
        no_edit,
        lambda c: c["security"]["required_scopes"].append("invoices:admin"),
        "security.scope_added",
        "security/required_scopes",
    ),
    (
        "tool renamed",
        DRAFT,
        no_edit,
        lambda c: c["identity"].__setitem__("name", "invoice.draft"),
        "identity.name_changed",
        "identity/name",
    ),
]


CASE = ("tool", "old_edit", "new_edit", "rule", "path")


def rule_paths(report: Report) -> set[tuple[str, str, str]]:
    return {(f.severity, f.rule, f.path) for f in report.findings}


@pytest.mark.parametrize(CASE, [c[1:] for c in BREAKING], ids=[c[0] for c in BREAKING])
def test_breaking_change_needs_a_major_bump(tool: str, old_edit: Edit, new_edit: Edit, rule: str, path: str) -> None:
    old = derive(tool, "1.0.0", old_edit)
    minor = check(old, derive(tool, "1.1.0", new_edit))
    assert ("breaking", rule, path) in rule_paths(minor), minor.findings
    assert not minor.ok and (minor.required_bump, minor.actual_bump) == ("major", "minor")
    assert "MAJOR" in minor.message and "2.0.0" in minor.message
    assert not check(old, derive(tool, "1.0.1", new_edit)).ok
    major = check(old, derive(tool, "2.0.0", new_edit))
    assert major.ok and (major.required_bump, major.actual_bump) == ("major", "major"), major.message
    assert major.findings == minor.findings


# (id, tool, edit of the old version, edit of the new version, the rule, its path), as in BREAKING
COMPATIBLE: list[tuple[str, str, Edit, Edit, str, str]] = [
    ("optional input field added", DRAFT, no_edit, add_optional_po, "input.property_added", f"{IN}/po_number"),
    (
        "maxLength relaxed",
        DRAFT,
        no_edit,
        set_keyword(line_prop("description"), "maxLength", 500),
        "input.bound_relaxed",
        f"{LINE}/description/maxLength",
    ),
    (
        "maximum relaxed",
        CHARGE,
        no_edit,
        set_keyword(prop("amount_cents"), "maximum", 200_000_000),
        "input.bound_relaxed",
        f"{IN}/amount_cents/maximum",
    ),
    (
        "enum value added",
        CHARGE,
        no_edit,
        set_keyword(prop("currency"), "enum", ["USD", "EUR", "GBP", "CHF"]),
        "input.enum_widened",
        f"{IN}/currency/enum",
    ),
    (
        "required input field made optional",
        DRAFT,
        no_edit,
        lambda c: inp(c)["required"].remove("due_date"),
        "input.required_removed",
        f"{IN}/due_date",
    ),
    (
        "integer widened to number",
        DRAFT,
        no_edit,
        set_keyword(line_prop("quantity"), "type", "number"),
        "input.type_widened",
        f"{LINE}/quantity/type",
    ),
    (
        "pattern removed",
        DRAFT,
        no_edit,
        drop_keyword(prop("customer_id"), "pattern"),
        "input.pattern_removed",
        f"{IN}/customer_id/pattern",
    ),
    (
        "additionalProperties opened",
        DRAFT,
        no_edit,
        drop_keyword(inp, "additionalProperties"),
        "input.additional_properties_opened",
        "input_schema/additionalProperties",
    ),
    (
        "relaxed under $defs",
        DRAFT,
        lines_via_defs,
        lambda c: (lines_via_defs(c), inp(c)["$defs"]["line"]["properties"]["quantity"].__setitem__("maximum", 5000)),
        "input.bound_relaxed",
        "input_schema/$defs/line/properties/quantity/maximum",
    ),
    ("output field added", DRAFT, no_edit, add_output_field, "output.property_added", f"{OUT}/created_at"),
    (
        "output field now always present",
        DRAFT,
        remove_output_currency,
        no_edit,
        "output.property_added",
        f"{OUT}/currency",
    ),
    (
        "output type narrowed",
        DRAFT,
        set_keyword(out_prop("invoice_id"), "type", ["string", "null"]),
        no_edit,
        "output.type_narrowed",
        f"{OUT}/invoice_id/type",
    ),
    (
        "output bound added",
        DRAFT,
        no_edit,
        set_keyword(out_prop("invoice_id"), "maxLength", 64),
        "output.bound_tightened",
        f"{OUT}/invoice_id/maxLength",
    ),
    (
        "output additionalProperties opened",
        DRAFT,
        no_edit,
        drop_keyword(out, "additionalProperties"),
        "output.additional_properties_opened",
        "output_schema/additionalProperties",
    ),
    (
        "side-effect class safer",
        DRAFT,
        no_edit,
        transactional("side_effect_class", "LOW_RISK_INTERNAL"),
        "behavior.side_effect_class_safer",
        "transactional/side_effect_class",
    ),
    (
        "scope removed",
        DRAFT,
        no_edit,
        lambda c: c["security"].__setitem__("required_scopes", []),
        "security.scope_removed",
        "security/required_scopes",
    ),
]


@pytest.mark.parametrize(CASE, [c[1:] for c in COMPATIBLE], ids=[c[0] for c in COMPATIBLE])
def test_compatible_change_needs_a_minor_bump(tool: str, old_edit: Edit, new_edit: Edit, rule: str, path: str) -> None:
    old = derive(tool, "1.0.0", old_edit)
    minor = check(old, derive(tool, "1.1.0", new_edit))
    assert ("compatible", rule, path) in rule_paths(minor), minor.findings
    assert minor.ok and not minor.breaking and minor.required_bump == "minor", minor.findings
    patch = check(old, derive(tool, "1.0.1", new_edit))
    assert not patch.ok and patch.actual_bump == "patch"
    assert "MINOR" in patch.message and "1.1.0" in patch.message
    assert check(old, derive(tool, "2.0.0", new_edit)).ok


def test_documentation_change_is_a_patch() -> None:
    def reword(c: dict[str, Any]) -> None:
        c["affordance"]["model_description"] += " Now with more words."
        prop("customer_id")(c)["description"] = "Another description."
        c["runtime"]["timeout_ms"] = 3000

    report = check(derive(DRAFT, "1.0.0"), derive(DRAFT, "1.0.1", reword))
    assert report.ok and report.findings == () and report.required_bump == "patch" and report.actual_bump == "patch"


def test_property_named_like_an_annotation_is_compared() -> None:
    """`description` is an annotation keyword and also the name of a line property."""

    def drop_description(c: dict[str, Any]) -> None:
        del line(c)["properties"]["description"]
        line(c)["required"].remove("description")
        del example(c)["lines"][0]["description"]

    report = check(derive(DRAFT, "1.0.0"), derive(DRAFT, "1.1.0", drop_description))
    assert ("breaking", "input.property_removed", f"{LINE}/description") in rule_paths(report)


@pytest.mark.parametrize(
    ("old", "new", "actual"),
    [("1.0.0", "1.0.0", "none"), ("1.2.0", "1.1.0", "downgrade"), ("2.0.0", "1.9.0", "downgrade")],
)
def test_the_version_must_increase(old: str, new: str, actual: str) -> None:
    report = check(derive(DRAFT, old), derive(DRAFT, new))
    assert not report.ok and report.actual_bump == actual and "greater" in report.message


def test_multiple_of() -> None:
    def multiple(n: int) -> Edit:
        return set_keyword(line_prop("quantity"), "multipleOf", n)

    def found(old: Edit, new: Edit) -> set[tuple[str, str, str]]:
        return rule_paths(check(derive(DRAFT, "1.0.0", old), derive(DRAFT, "2.0.0", new)))

    where = f"{LINE}/quantity/multipleOf"
    assert found(multiple(10), multiple(5)) == {("compatible", "input.multiple_of_relaxed", where)}
    assert found(multiple(5), multiple(10)) == {("breaking", "input.multiple_of_tightened", where)}
    assert found(multiple(2), multiple(5)) == {("breaking", "input.multiple_of_changed", where)}


def test_report_to_dict() -> None:
    smaller = set_keyword(prop("amount_cents"), "maximum", 500_000)
    report = check(derive(CHARGE, "1.0.0"), derive(CHARGE, "1.1.0", smaller))
    as_dict = json.loads(json.dumps(report.to_dict()))
    assert {k: as_dict[k] for k in ("name", "old_version", "new_version", "ok", "required_bump", "actual_bump")} == {
        "name": CHARGE,
        "old_version": "1.0.0",
        "new_version": "1.1.0",
        "ok": False,
        "required_bump": "major",
        "actual_bump": "minor",
    }
    assert as_dict["findings"] == [
        {
            "severity": "breaking",
            "path": f"{IN}/amount_cents/maximum",
            "rule": "input.bound_tightened",
            "message": "maximum 100000000 -> 500000",
        }
    ]


def test_check_takes_the_contract_section_alone() -> None:
    old, new = derive(DRAFT, "1.0.0"), derive(DRAFT, "1.1.0", add_optional_po)
    assert check(old["contract"], new["contract"]) == check(old, new)


# --- the shipped contracts -------------------------------------------------------------------


def test_shipped_contracts_are_all_compatible() -> None:
    reports = check_registry(load_registry())
    assert reports and all(r.ok for r in reports), [r.message for r in reports if not r.ok]
    assert ("invoice.fetch", "0.9.0", "1.0.0") in {(r.name, r.old_version, r.new_version) for r in reports}


def test_shipped_deprecated_version() -> None:
    old = SHIPPED.get("invoice.fetch", "0.9.0")
    assert old.lifecycle == "deprecated"
    assert SHIPPED.resolve("invoice.fetch", "latest").version == "1.0.0"
    assert SHIPPED.resolve("invoice.fetch", "1.x").version == "1.0.0"
    assert SHIPPED.resolve("invoice.fetch", "0.9.0") is old
    (warning,) = deprecation_warnings(old)
    assert "sunset on 2027-" in warning and "invoice.fetch@1.0.0" in warning


def test_check_registry_checks_consecutive_versions_in_version_order() -> None:
    registry = Registry(
        admit(derive(DRAFT, version, *edits), version)
        for version, edits in [
            ("1.10.0", (add_required_po,)),  # breaking since 1.2.0 under a MINOR bump
            ("1.2.0", (add_optional_po,)),
            ("1.0.0", ()),
            ("2.0.0", (add_required_po,)),
        ]
    )
    reports = check_registry(registry)
    assert [(r.old_version, r.new_version, r.ok) for r in reports] == [
        ("1.0.0", "1.2.0", True),
        ("1.2.0", "1.10.0", False),
        ("1.10.0", "2.0.0", True),
    ]


# --- export ----------------------------------------------------------------------------------


def test_export_one_definition_per_tool() -> None:
    definitions = export(SHIPPED)
    assert [d["tool"] for d in definitions] == SHIPPED.names()
    names = [d["name"] for d in definitions]
    assert len(set(names)) == len(names) and all(MODEL_NAME.fullmatch(n) for n in names), names
    for shown in definitions:
        contract = SHIPPED.resolve(shown["tool"], "latest")
        assert shown["version"] == contract.version and "deprecated" not in shown
        assert shown["input_schema"] == contract.input_schema
        assert shown["examples"] == contract.document["affordance"]["examples"]
        assert shown["description"].startswith(contract.document["affordance"]["model_description"])
        assert shown["side_effect_class"] == contract.side_effect_class
        assert shown["requires_approval"] is (contract.required_approvals > 0)
    fetch = next(d for d in definitions if d["tool"] == "invoice.fetch")
    assert (fetch["name"], fetch["version"]) == ("invoice_fetch_v1", "1.0.0")
    charge = next(d for d in definitions if d["tool"] == CHARGE)
    assert charge["requires_approval"] is True and "human approval" in charge["description"]


def test_export_description_lines() -> None:
    (draft,) = [d for d in export(SHIPPED) if d["tool"] == DRAFT]
    lines = draft["description"].split("\n")
    assert lines[1] == "Use for: Create a draft invoice the user asked for, with explicit line items"
    assert lines[2].startswith("Do not use for: Sending or finalizing an invoice; Charging a customer; ")


def test_export_deprecated_only_when_asked() -> None:
    shown = {(d["tool"], d["version"]) for d in export(SHIPPED)}
    assert ("invoice.fetch", "1.0.0") in shown and ("invoice.fetch", "0.9.0") not in shown
    with_deprecated = export(SHIPPED, include_deprecated=True)
    (old,) = [d for d in with_deprecated if (d["tool"], d["version"]) == ("invoice.fetch", "0.9.0")]
    assert old["name"] == "invoice_fetch_v0"
    assert old["deprecated"] == {"sunset_date": old["deprecated"]["sunset_date"], "replacement": "invoice.fetch@1.0.0"}
    assert (
        old["description"].startswith("DEPRECATED (sunset 2027-")
        and "use invoice.fetch@1.0.0 instead" in old["description"]
    )


def test_export_never_sunsetted_and_one_name_per_major() -> None:
    deprecated = {"status": "deprecated", "sunset_date": "2031-01-01", "replacement": f"{DRAFT}@2.x"}
    registry = Registry(
        admit(d, "test")
        for d in [
            derive(DRAFT, "1.0.0", **deprecated),
            derive(DRAFT, "1.1.0", **deprecated),
            derive(DRAFT, "2.0.0", add_required_po),
            derive(DRAFT, "2.1.0", add_required_po, status="deprecated"),  # superseded by the active 2.0.0
            derive(DRAFT, "3.0.0", add_required_po, status="sunsetted", sunset_date="2024-01-01"),
        ]
    )
    assert [(d["name"], d["version"]) for d in export(registry)] == [("invoice_create_draft_v2", "2.0.0")]
    shown = [(d["name"], d["version"], "deprecated" in d) for d in export(registry, include_deprecated=True)]
    assert shown == [("invoice_create_draft_v2", "2.0.0", False), ("invoice_create_draft_v1", "1.1.0", True)]


def test_export_returns_copies_under_a_note() -> None:
    export(SHIPPED)[0]["input_schema"]["properties"].clear()
    assert export(SHIPPED)[0]["input_schema"]["properties"]
    exported = export_document(SHIPPED)
    assert exported["note"] == NOTE and "Advisory" in NOTE and exported["tools"] == export(SHIPPED)


def test_model_names() -> None:
    assert model_name("invoice.fetch", 1) == "invoice_fetch_v1"
    long = model_name("a" * 128, 12)
    assert MODEL_NAME.fullmatch(long) and long.endswith("_v12") and len(long) == 64

    def rename(name: str) -> Edit:
        return lambda c: c["identity"].__setitem__("name", name)

    registry = Registry(admit(derive(DRAFT, "1.0.0", rename(n)), n) for n in ("a.b", "a_b"))
    names = [d["name"] for d in export(registry)]
    assert len(set(names)) == 2 and names[0] == "a_b_v1" and all(MODEL_NAME.fullmatch(n) for n in names)


# --- toolgate contracts ------------------------------------------------------------------------


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Any]:
    """Invoke `toolgate contracts ...` with only the shipped contracts (no runtime file, no extra dir)."""
    monkeypatch.setenv("TOOLGATE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TOOLGATE_CONTRACTS_DIR", raising=False)
    runner = CliRunner()
    return lambda *args: runner.invoke(contracts_app, [str(a) for a in args], env={"COLUMNS": "200"})


def write(path: Path, contract: dict[str, Any]) -> Path:
    path.write_text(json.dumps(contract))
    return path


def test_cli_check_breaking_pair(cli: Callable[..., Any], tmp_path: Path) -> None:
    old = write(tmp_path / "old.json", derive(CHARGE, "1.0.0"))
    smaller = set_keyword(prop("amount_cents"), "maximum", 200_000)
    new = write(tmp_path / "new.json", derive(CHARGE, "1.1.0", smaller))
    result = cli("check", old, new)
    assert result.exit_code == 1, result.output
    assert "input.bound_tightened" in result.output and f"{IN}/amount_cents/maximum" in result.output
    assert "2.0.0" in result.output
    as_json = cli("check", old, new, "--json")
    assert as_json.exit_code == 1 and json.loads(as_json.output)["findings"][0]["rule"] == "input.bound_tightened"
    major = write(tmp_path / "major.json", derive(CHARGE, "2.0.0", smaller))
    assert cli("check", old, major).exit_code == 0


def test_cli_check_references(cli: Callable[..., Any], tmp_path: Path) -> None:
    result = cli("check", "invoice.fetch@0.9.0", "invoice.fetch@latest", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["actual_bump"] == "major"
    newer = write(tmp_path / "newer.json", derive(DRAFT, "1.0.1", add_optional_po))  # a file against a reference
    result = cli("check", f"{DRAFT}@1.0.0", newer)
    assert result.exit_code == 1 and "input.property_added" in result.output
    assert cli("check", "invoice.fetch@7.0.0", "invoice.fetch@1.0.0").exit_code == 2
    assert cli("check", "nonsense", "invoice.fetch@1.0.0").exit_code == 2
    assert cli("check", "invoice.fetch@1.0.0").exit_code == 2
    assert cli("check", "--all", "invoice.fetch@0.9.0", "invoice.fetch@1.0.0").exit_code == 2


def test_cli_check_all(cli: Callable[..., Any]) -> None:
    result = cli("check", "--all")
    assert result.exit_code == 0, result.output
    assert "invoice.fetch 0.9.0 -> 1.0.0" in result.output
    reports = json.loads(cli("check", "--all", "--json").output)
    assert reports and all(r["ok"] for r in reports)


def test_cli_check_all_includes_the_contracts_dir(
    cli: Callable[..., Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    extra = tmp_path / "contracts"
    (extra / DRAFT).mkdir(parents=True)
    write(extra / DRAFT / "1.1.0.json", derive(DRAFT, "1.1.0", add_required_po))
    monkeypatch.setenv("TOOLGATE_CONTRACTS_DIR", str(extra))
    result = cli("check", "--all")
    assert result.exit_code == 1 and "input.required_added" in result.output and f"{IN}/po_number" in result.output


def test_cli_export(cli: Callable[..., Any], tmp_path: Path) -> None:
    result = cli("export")
    assert result.exit_code == 0, result.output
    exported = json.loads(result.output)
    assert exported["note"] == NOTE
    versions = {(d["tool"], d["version"]) for d in exported["tools"]}
    assert ("invoice.fetch", "1.0.0") in versions and ("invoice.fetch", "0.9.0") not in versions
    out_file = tmp_path / "tools.json"
    result = cli("export", "--include-deprecated", "--out", out_file)
    assert result.exit_code == 0 and re.search(r"wrote \d+ tool definition", result.output)
    versions = {(d["tool"], d["version"]) for d in json.loads(out_file.read_text())["tools"]}
    assert {("invoice.fetch", "1.0.0"), ("invoice.fetch", "0.9.0")} <= versions


def test_cli_list(cli: Callable[..., Any]) -> None:
    result = cli("list", "--json")
    assert result.exit_code == 0, result.output
    rows = {(r["name"], r["version"]): r for r in json.loads(result.output)}
    assert rows[("invoice.fetch", "0.9.0")]["lifecycle"] == "deprecated"
    assert rows[(CHARGE, "1.0.0")]["required_approvals"] == SHIPPED.get(CHARGE, "1.0.0").required_approvals
    assert set(rows) == {(c.name, c.version) for c in SHIPPED}
    table = cli("list")
    assert table.exit_code == 0 and "invoice.fetch" in table.output and "deprecated" in table.output


def test_cli_list_names_each_versions_owner_and_sunset_date(cli: Callable[..., Any]) -> None:
    done = cli("list", "--json")
    assert done.exit_code == 0, done.output
    rows = {(r["name"], r["version"]): r for r in json.loads(done.output)}
    old = rows[(DRAFT, "1.0.0")]
    assert (old["owner"], old["lifecycle"], old["sunset_date"]) == (
        "team-billing@toolgate.demo",
        "sunsetted",
        "2026-11-28",
    )
    assert rows[(CHARGE, "1.0.0")]["sunset_date"] is None
