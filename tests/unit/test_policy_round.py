"""The policy stage's round (workers/policy/round_decisions.py), as PolicyHandler decides it:
Cedar judges a round's calls in one batch, except a call whose action's policies read the usage
the round spends, judged in its turn against what the calls before it spent. And a policy worker
whose Cedar set cannot be admitted does not start (ops/stage.py). No I/O."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.unit.factories import registry, stage_record
from tests.unit.json_rules import SHIPPED
from tests.unit.test_cedar_policy import BASE, DOMAINS, NOON, codes, contract, shipped
from toolgate.contracts.budgets import load_budgets
from toolgate.contracts.cedar_policy import CedarPolicy, admit_policies, policy_files
from toolgate.contracts.contract import Contract
from toolgate.ops.stage import run_stage
from toolgate.schemas.models import StageRecord
from toolgate.settings import Settings, load_settings
from toolgate.workers.policy import round_decisions
from toolgate.workers.policy.case import Permit, Usage
from toolgate.workers.policy.cedar import judge
from toolgate.workers.policy.decision import Allow, Deny, refs
from toolgate.workers.policy.round_decisions import RoundVerdicts, ask_of, decide_round, reads_usage

COUNTING = BASE + (
    '@id("third-charge") @message("two charges a run at most")\n'
    'forbid (principal, action in Action::"payment.charge_card", resource)\n'
    "when { context.usage.run.financial >= 2 };"
)
Call = tuple[StageRecord, Contract, str]


def call(name: str, index: int, arguments: dict[str, Any] | None = None, **overrides: Any) -> Call:
    c = contract(name)
    ids = {"call_id": f"call_{index}", "logical_operation_id": f"op_{index}"}
    return stage_record(c, arguments, **{**ids, **overrides}), c, f"event-{index}"


def charge(index: int, cents: int = 125_000, **overrides: Any) -> Call:
    arguments = {"invoice_id": f"inv_acme{index:04d}", "amount_cents": cents, "currency": "USD"}
    return call("payment.charge_card", index, arguments, **overrides)


def decided(cedar: CedarPolicy, calls: list[Call]) -> tuple[list[Allow | Deny], Usage]:
    """The round's decisions, each charge's invoice open for exactly its amount."""
    known: dict[Any, Any] = {}
    for record, c, _ in calls:
        row = {"tenant_id": "acme", "status": "open", "currency": "USD"}
        row["amount_cents"] = record.call.arguments.get("amount_cents", 125_000)
        known.update({(lookup, v): ({"id": v, **row},) for lookup, v in refs(record, c) if isinstance(v, str)})
    used = Usage()
    decisions = list(decide_round(load_budgets(), cedar, calls, known, used, NOON, "dev", frozenset(), DOMAINS))
    return decisions, used


def outcome(decision: Allow | Deny) -> str:
    return codes(decision) if isinstance(decision, Deny) else f"allow {decision.required_approvals}"


def test_a_policy_on_usage_sees_what_the_rounds_earlier_calls_spent() -> None:
    counting = admit_policies([("u.cedar", COUNTING)], registry())
    calls = [
        charge(0, dry_run=True),  # a dry run spends nothing
        charge(1),
        call("invoice.fetch", 2),
        charge(3),
        charge(4),  # its run spent two charges before it, in this round
        charge(5, run_id="run_2"),  # another run's first
    ]
    decisions, used = decided(counting, calls)
    assert [outcome(d) for d in decisions] == [
        "allow 2",
        "allow 2",
        "allow 0",
        "allow 2",
        "policy.third-charge",
        "allow 2",
    ]
    assert used.per_run[("acme", "agent_1", "run_1", "financial")] == 2
    # Judged all at once against the usage read before the round, every charge would pass.
    fresh = [ask_of(record, c, Usage(), "dev", NOON) for record, c, _ in calls]
    assert all(isinstance(v, Permit) for v in judge(counting, fresh, DOMAINS))
    # Only the calls whose policies read the usage wait for their turn.
    assert reads_usage(counting, contract("payment.charge_card"))
    assert not reads_usage(counting, contract("invoice.fetch"))
    verdicts = RoundVerdicts(counting, [(r, c) for r, c, _ in calls], Usage(), "dev", NOON, DOMAINS)
    assert set(verdicts.ahead) == {2}


def test_the_shipped_set_judges_a_round_in_one_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    policy = shipped()
    assert not any(reads_usage(policy, c) for c in registry())
    asked: list[int] = []

    def counted(*args: Any) -> Any:
        asked.append(len(args[1]))
        return judge(*args)

    monkeypatch.setattr(round_decisions, "judge", counted)
    calls = [charge(0, cents=750_000), charge(1, cents=10**7), call("invoice.fetch", 2), charge(3, cents=50_000)]
    decisions, _ = decided(policy, calls)
    assert asked == [4]
    assert [outcome(d) for d in decisions] == ["allow 2", "policy.charge-hard-limit", "allow 0", "allow 2"]
    assert [d.approver_groups for d in decisions if isinstance(d, Allow)] == [("finance-directors",), (), ()]


def test_a_policy_worker_whose_cedar_set_cannot_be_admitted_does_not_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "bad.cedar").write_text(
        '@id("wrong-argument") forbid (principal, action in Action::"notify.send_email", resource)\n'
        "when { context.arguments.amount_cents > 5 };\n"
        '@id("no-count") @approvals("eleven") permit (principal, action, resource);\n'
    )
    monkeypatch.setattr("toolgate.ops.stage.configure_logging", lambda level: None)
    with pytest.raises(SystemExit) as refused:
        run_stage("policy", Settings(home=tmp_path / "home", policy_dir=tmp_path))
    said = str(refused.value.code)
    assert said.startswith("toolgate worker policy refused to start: Cedar policy set refused: ")
    assert "bad.cedar: policy wrong-argument: " in said and "amount_cents" in said
    assert "bad.cedar: policy no-count: @approvals('eleven') is not a whole number from 1 to 10" in said


def test_a_policy_set_without_its_budgets_stops_the_policy_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for source, text in policy_files():
        (tmp_path / Path(source).name).write_text(text)
    monkeypatch.setattr("toolgate.ops.stage.configure_logging", lambda level: None)
    with pytest.raises(SystemExit) as refused:
        run_stage("policy", Settings(home=tmp_path / "home", policy_dir=tmp_path))
    assert f"{tmp_path / 'budgets.json'}: budgets refused" in str(refused.value.code)
    (tmp_path / "budgets.json").write_text(json.dumps(SHIPPED))  # 0.2.0's document: rules and budgets
    with pytest.raises(SystemExit) as refused:
        run_stage("policy", Settings(home=tmp_path / "home", policy_dir=tmp_path))
    assert "toolgate policy convert" in str(refused.value.code)


def test_the_policy_file_setting_that_went_stops_a_process_rather_than_be_ignored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TOOLGATE_POLICY_FILE", "/etc/toolgate/policy.json")
    with pytest.raises(ValueError, match=r"TOOLGATE_POLICY_FILE is no longer read: .*toolgate policy convert"):
        load_settings(use_runtime=False)
