"""`toolgate policy convert`: a JSON policy document as a Cedar set that decides every case as
the JSON rules did, and its budgets kept apart unchanged. No I/O."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.unit.factories import registry, stage_record
from tests.unit.json_rules import SHIPPED, json_verdict
from tests.unit.test_cedar_policy import NIGHT, NOON, agent_of, facts, one, outcome, variants
from toolgate.cli.policy import policy_app
from toolgate.contracts.admission import ContractRefused
from toolgate.contracts.budgets import admit, load_budgets
from toolgate.contracts.cedar_policy import CedarPolicy, admit_policies
from toolgate.contracts.policy_convert import BUDGETS_FILE, RULES_FILE, admit_json_policy, convert
from toolgate.workers.policy.cedar import Ask
from toolgate.workers.policy.decision import Usage, decide

LATE = int(dt.datetime(2026, 11, 23, 23, 30, tzinfo=dt.UTC).timestamp() * 1000)
EDGE = int(dt.datetime(2026, 11, 23, 19, 0, tzinfo=dt.UTC).timestamp() * 1000)  # the window's end: outside

RICHER: dict[str, Any] = {
    "rules": [
        {
            "id": "globex-no-charges-or-voids",
            "effect": "deny",
            "when": {
                "tool": ["payment.charge_card", "invoice.void_draft"],
                "side_effect_class": ["CRITICAL_MUTATION", "READ_ONLY"],
                "tenant": ["globex", "initech"],
            },
            "message": 'globex may not "charge" or void \\ anything',
        },
        {
            "id": "night-reads-of-regulated-data",
            "effect": "require_approvals",
            "approvals": 3,
            "when": {
                "data_classification": ["regulated", "confidential"],
                "environment": ["prod", "staging"],
                "outside_hours_utc": "06:00-22:00",
            },
            "message": "regulated data at night\nneeds three people",
        },
        {
            "id": "wrapped-window",
            "effect": "deny",
            "when": {"tool": ["notify.send_email"], "outside_hours_utc": "22:00-06:00"},
            "message": "a window that ends before it starts is never inside: always outside",
        },
        {
            "id": "acme-external-two",
            "effect": "require_approvals",
            "approvals": 2,
            "when": {"side_effect_class": ["HIGH_RISK_EXTERNAL"], "tenant": ["acme"]},
            "message": "acme's external actions need two",
        },
    ],
    "budgets": {
        "per_run": {"read": 5, "write": 5, "external_action": 5, "financial": 5, "critical_mutation": 5},
        "per_tenant_per_day": {
            "read": 10,
            "write": 10,
            "external_action": 10,
            "financial": 10,
            "critical_mutation": 10,
        },
    },
    "repair": {"max_attempts_per_operation": 2, "budget_per_run": 7},
}


def converted(document: dict[str, Any]) -> tuple[CedarPolicy, dict[str, str]]:
    files = convert(document, "policy.json")
    return admit_policies([(RULES_FILE, files[RULES_FILE])], registry()), files


def decides_alike(
    cedar: CedarPolicy, document: dict[str, Any], tenants: tuple[str, ...], times: tuple[int, ...]
) -> set[Any]:
    """Every shipped contract and its secret and open-egress variants, in each environment, tenant
    and time: the Cedar set's decision is the JSON rules' (tests/unit/json_rules.py), under the
    document's budgets. Returns the outcomes seen."""
    budgets = admit({k: v for k, v in document.items() if k != "rules"}, "budgets")
    seen = set()
    for c in variants():
        for environment in ("dev", "staging", "prod"):
            for tenant in tenants:
                for now in times:
                    record = agent_of(Ask(stage_record(c), c, environment, now, {}, {}), "agent_1", tenant).record
                    known = {key: ({**row, "tenant_id": tenant},) for key, (row,) in facts(c, record).items()}
                    verdict = one(cedar, Ask(record, c, environment, now, {}, {}))
                    old = json_verdict(document["rules"], record, c, environment, now)
                    expected = decide(record, c, budgets, known, Usage(), "e", now, environment, verdict=old)
                    got = decide(record, c, budgets, known, Usage(), "e", now, environment, verdict=verdict)
                    assert outcome(got) == outcome(expected), (c.name, c.document["security"], environment, now)
                    seen.add(outcome(expected))
    return seen


def test_the_shipped_json_policy_converts_to_a_set_that_decides_as_it_did() -> None:
    cedar, files = converted(SHIPPED)
    assert [r.id for r in cedar.rules.values()] == [
        "baseline",
        "no-secret-data",
        "open-egress-needs-approval",
        "prod-writes-need-approval",
        "prod-money-in-business-hours",
    ]
    assert cedar.agents_alike
    seen = decides_alike(cedar, SHIPPED, ("acme",), (NOON, NIGHT, EDGE))
    assert {"policy.no-secret-data", "policy.prod-money-in-business-hours"} <= {code for code, _ in seen}
    assert {("allow", 0), ("allow", 1), ("allow", 2)} <= seen
    assert json.loads(files[BUDGETS_FILE]) == {k: v for k, v in SHIPPED.items() if k != "rules"}
    shipped = {k: v for k, v in load_budgets().document.items() if k != "value_budgets"}  # newer than the JSON format
    assert json.loads(files[BUDGETS_FILE]) == shipped  # what ships beside the Cedar set


def test_every_kind_of_condition_converts_to_one_that_decides_as_it_did() -> None:
    cedar, _ = converted(RICHER)
    seen = decides_alike(cedar, RICHER, ("acme", "globex", "initech"), (NOON, NIGHT, LATE, EDGE))
    codes = {code for code, _ in seen}
    assert {"policy.globex-no-charges-or-voids", "policy.wrapped-window"} <= codes
    assert {("allow", 3), ("allow", 2)} <= seen
    rules = {r.id: r for r in cedar.rules.values()}
    assert rules["globex-no-charges-or-voids"].message == 'globex may not "charge" or void \\ anything'
    assert rules["night-reads-of-regulated-data"].approvals == 3


# --- toolgate policy convert | check -------------------------------------------------------------


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Any]:
    """Invoke `toolgate policy ...` with only the shipped contracts (no runtime file, no extra dir)."""
    monkeypatch.setenv("TOOLGATE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TOOLGATE_CONTRACTS_DIR", raising=False)
    runner = CliRunner()
    return lambda *args: runner.invoke(policy_app, [str(a) for a in args], env={"COLUMNS": "200"})


def test_convert_writes_a_set_that_check_admits_and_never_overwrites_unasked(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    source = tmp_path / "policy.json"
    source.write_text(json.dumps(RICHER))
    out = tmp_path / "set"
    result = cli("convert", source, out)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == [BUDGETS_FILE, RULES_FILE]
    checked = cli("check", out)
    assert checked.exit_code == 0 and "5 policies and their budgets admitted" in checked.output, checked.output
    again = cli("convert", source, out)
    assert again.exit_code == 2 and "--force" in again.output
    assert cli("convert", source, out, "--force").exit_code == 0


def test_check_names_what_refuses_a_set_and_convert_what_refuses_a_document(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "a.cedar").write_text(
        '@id("wrong") forbid (principal, action in Action::"notify.send_email", resource)\n'
        "when { context.arguments.amount_cents > 1 };"
    )
    result = cli("check", bad)
    assert result.exit_code == 1 and "a.cedar: policy wrong" in result.output, result.output
    unknown = tmp_path / "unknown.json"
    unknown.write_text(json.dumps({**RICHER, "rules": [{**RICHER["rules"][0], "when": {"tool": ["no.such_tool"]}}]}))
    refused = cli("convert", unknown, tmp_path / "out")
    assert refused.exit_code == 1 and "no.such_tool" in refused.output, refused.output
    assert not (tmp_path / "out").exists()
    invalid = tmp_path / "invalid.json"
    invalid.write_text(json.dumps({"rules": []}))
    assert cli("convert", invalid, tmp_path / "out").exit_code == 2


@pytest.mark.parametrize(
    "document",
    [
        {"budgets": {"per_run": {}, "per_tenant_per_day": {}}},
        {
            "rules": [{"id": "x", "effect": "deny", "when": {"planet": ["mars"]}, "message": "m"}],
            "budgets": {"per_run": {}, "per_tenant_per_day": {}},
        },
        {
            "rules": [{"id": "x", "effect": "require_approvals", "when": {"tool": ["t"]}, "message": "m"}],
            "budgets": {"per_run": {}, "per_tenant_per_day": {}},
        },
        {"rules": [], "budgets": {"per_run": {"read": -1}, "per_tenant_per_day": {}}},
    ],
    ids=["no-rules", "unknown-condition", "approvals-without-number", "negative-budget"],
)
def test_a_json_policy_that_0_2_0_refused_is_refused_by_the_converter(document: dict[str, Any]) -> None:
    with pytest.raises(ContractRefused):
        admit_json_policy(document, "old.json")
    assert admit_json_policy(SHIPPED, "policy.json") == SHIPPED
