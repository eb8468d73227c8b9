"""Every decision names its inputs (issue 51, part 3): the records the policy round makes of its
decisions (workers/policy/witness.py) and validation of its refusals (workers/validation/
recorded.py); and what-if over them (ops/whatif.py): a recorded round replayed under the same set
changes nothing, under a stricter one reports what it would refuse. No I/O."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.unit.factories import registry, stage_record
from tests.unit.test_cedar_policy import DOMAINS, NOON
from tests.unit.test_policy_round import Call, call, charge
from toolgate.contracts.budgets import load_budgets
from toolgate.contracts.policy_set import PolicySet, admit_set, load_policy_set
from toolgate.ops import whatif
from toolgate.schemas.codec import codec
from toolgate.schemas.models import FieldError, TaxonomyClass
from toolgate.store.rows import Decided
from toolgate.workers.policy.case import Usage
from toolgate.workers.policy.decision import refs
from toolgate.workers.policy.round_decisions import decide_round
from toolgate.workers.policy.witness import MARK, Inputs, Witness, opened, redact, validation_row
from toolgate.workers.validation import recorded
from toolgate.workers.validation.decision import Pass, Reject

STRICT = (
    '@id("charge-limit-1000") @message("no charge over 1,000 USD")\n'
    'forbid (principal, action in Action::"payment.charge_card", resource)\n'
    'when { context.arguments.currency == "USD" && context.arguments.amount_cents > 100000 };\n'
)


def facts_for(calls: list[Call], other_tenant: str | None = None) -> dict[Any, Any]:
    known: dict[Any, Any] = {}
    for record, c, _ in calls:
        row = {"tenant_id": "acme", "status": "open", "currency": "USD"}
        row["amount_cents"] = record.call.arguments.get("amount_cents", 125_000)
        for lookup, v in refs(record, c):
            if isinstance(v, str):
                rows = [{"id": v, **row}] + (
                    [{"id": v, "tenant_id": other_tenant, "secret": "x"}] if other_tenant else []
                )
                known[(lookup, v)] = rows
    return known


def written_round(policy: PolicySet, calls: list[Call], **kw: Any) -> tuple[list[Any], list[Decided]]:
    """A round decided as PolicyHandler decides it, and the records it writes."""
    known = facts_for(calls, kw.pop("other_tenant", None))
    used = Usage()
    inputs = Inputs(known, "dev", NOON, kw.pop("quarantined", frozenset()), DOMAINS, policy.budgets)
    read = [codec().encode(record) for record, _, _ in calls]  # each record's bytes, as the stage read them
    witness = Witness(calls, read, used, inputs, kw.pop("scrub", lambda v: v))
    decisions = list(
        witness.watch(
            decide_round(policy.budgets, policy.cedar, calls, known, used, NOON, "dev", inputs.quarantined, DOMAINS)
        )
    )
    return decisions, witness.rows(policy.digest, registry().digest)


def recorded_round(policy: PolicySet, calls: list[Call], **kw: Any) -> tuple[list[Any], list[Decided]]:
    """A round decided as PolicyHandler decides it, and its records as `policy decided` and `whatif`
    read them back (opened: the call decoded from its bytes, validation's pass beside it)."""
    scrub = kw.get("scrub", lambda v: v)
    decisions, rows = written_round(policy, calls, **kw)
    return decisions, [seen for row in rows for seen in opened(row, scrub)]


def shipped_set() -> PolicySet:
    return load_policy_set(registry())


def stricter(tmp_path: Path) -> PolicySet:
    for source in Path(str(Path(__file__).parents[2] / "contracts" / "cedar")).iterdir():
        (tmp_path / source.name).write_text(source.read_text())
    (tmp_path / "strict.cedar").write_text(STRICT)
    return load_policy_set(registry(), tmp_path)


def test_each_decision_names_the_set_the_contracts_and_its_inputs() -> None:
    policy = shipped_set()
    calls = [charge(1, run_id="run_r"), charge(2, cents=600_000, run_id="run_r"), call("invoice.fetch", 3)]
    _, rows = recorded_round(policy, calls)
    mine = [r for r in rows if r.stage == "policy"]
    assert [r.outcome for r in mine] == ["allow", "allow", "allow"]
    assert {r.policy_digest for r in mine} == {policy.digest}
    assert {r.contracts_digest for r in mine} == {registry().digest}
    big = mine[1]
    assert (big.approvals, big.approver_groups) == (2, ["finance-directors"])
    assert big.call is not None and big.call["arguments"]["amount_cents"] == 600_000
    assert big.facts is not None
    assert big.facts["environment"] == "dev" and big.facts["now_ms"] == NOON
    assert big.facts["domains"] == ["acme.example"] and big.facts["quarantined"] is False
    assert big.facts["resources"][0]["row"]["amount_cents"] == 600_000
    # usage as the call saw it: before its own decision, after the round's first charge of its run
    assert mine[0].usage is not None and mine[0].usage["run"] == {}
    assert (
        big.usage is not None
        and big.usage["run"] == {"financial": 1, "critical_mutation": 1}
        and big.usage["counted_before"] is False
    )
    assert big.usage["rate"]["window_sec"] > 0 and big.usage["event_id"] == "event-2"


def test_a_refusal_names_its_class_code_and_rule() -> None:
    _, rows = recorded_round(shipped_set(), [charge(1, cents=1_100_000)])
    (policy,) = [r for r in rows if r.stage == "policy"]
    assert (policy.outcome, policy.taxonomy_class, policy.code, policy.rule) == (
        "refuse",
        "POLICY_VIOLATION",
        "policy.charge-hard-limit",
        "charge-hard-limit",
    )
    _, rows = recorded_round(shipped_set(), [charge(2)], quarantined=frozenset({("payment.charge_card", "1.0.0")}))
    (held,) = [r for r in rows if r.stage == "policy"]
    assert held.outcome == "refuse" and held.facts is not None and held.facts["quarantined"] is True


def test_another_tenants_row_is_not_recorded_only_that_there_is_one() -> None:
    record, c, event = charge(1)
    other = stage_record(c, dict(record.call.arguments), tenant_id="globex", call_id="call_g")
    _, rows = recorded_round(shipped_set(), [(other, c, event)], other_tenant="acme")
    (policy,) = [r for r in rows if r.stage == "policy"]
    assert policy.code == "resource_missing"
    assert policy.facts is not None
    resources = policy.facts["resources"]  # the tenant binding's lookup and the state check's
    assert resources and all(r["row"] is None and r["elsewhere"] is True for r in resources)
    assert "open" not in json.dumps(policy.facts)  # the other tenant's row (its status) is not kept


def test_nothing_secret_shaped_is_recorded() -> None:
    value = {"to": "a@b.example", "api_key": "k-123", "nested": [{"password": "p"}], "body": "uses sk_live_abcdef"}
    scrub = lambda v: json.loads(json.dumps(v).replace("sk_live_abcdef", MARK))  # noqa: E731 (a registered secret)
    assert redact(value, scrub) == {
        "to": "a@b.example",
        "api_key": MARK,
        "nested": [{"password": MARK}],
        "body": f"uses {MARK}",
    }


def test_a_calls_secret_named_argument_is_not_recorded() -> None:
    record, c, event = call("invoice.fetch", 1, {"invoice_id": "inv_acme0001", "session_token": "t-123"})
    _, rows = recorded_round(shipped_set(), [(record, c, event)])
    (policy,) = [r for r in rows if r.stage == "policy"]
    assert policy.call is not None and policy.call["arguments"] == {"invoice_id": "inv_acme0001", "session_token": MARK}
    assert "t-123" not in json.dumps([policy.call, policy.facts, policy.usage])


def test_validations_pass_travels_in_its_stage_decision_and_is_recorded_by_policy() -> None:
    record, _, _ = charge(1)
    passed = record.model_copy(update={"decisions": [recorded.passed("c0ffee", 1234)]})
    row = validation_row(passed)
    assert row is not None
    assert (row.stage, row.outcome, row.contracts_digest, row.decided_at_ms) == ("validation", "pass", "c0ffee", 1234)
    _, rows = recorded_round(shipped_set(), [(passed, *charge(1)[1:])])
    assert [r.stage for r in rows] == ["validation", "policy"]
    assert rows[0].contracts_digest == "c0ffee"


def test_a_passed_call_is_written_as_one_row_that_names_it_by_the_bytes_judged() -> None:
    record, c, event = charge(1)
    passed = record.model_copy(update={"decisions": [recorded.passed("c0ffee", 1234)]})
    _, (row,) = written_round(shipped_set(), [(passed, c, event)])
    assert (row.stage, row.call) == ("policy", None)  # no dump of the call; validation's pass is inside
    assert row.record == codec().encode(passed)
    (seen_pass, seen) = opened(row, lambda v: v)
    assert seen.record is None and seen.call == passed.call.model_dump(mode="json")
    assert (seen_pass.stage, seen_pass.outcome, seen_pass.call_id) == ("validation", "pass", passed.call.call_id)


def test_a_round_writes_a_resource_named_by_many_calls_once() -> None:
    invoice = {"invoice_id": "inv_acme0001", "amount_cents": 125_000, "currency": "USD"}
    calls = [call("payment.charge_card", i, invoice) for i in (1, 2)]
    _, rows = written_round(shipped_set(), calls)
    first, second = (r.facts["resources"] for r in rows if r.facts is not None)
    assert first == second and all(a is b for a, b in zip(first, second, strict=True))


def test_validations_refusals_are_recorded_without_the_models_text() -> None:
    from tests.unit.factories import proposal

    refused = proposal("payment.charge_card", "{not json")
    ok = proposal("invoice.fetch", {"invoice_id": "inv_1"})
    error = FieldError(code="parse_error", message="not JSON")
    c = registry().resolve("invoice.fetch", "latest")
    rows = recorded.refusals(
        [refused, ok], [Reject(TaxonomyClass.SYNTACTIC_PARSE_FAIL, (error,)), Pass(c, {}, "h")], "digest", 99
    )
    (row,) = rows
    assert (row.stage, row.outcome, row.taxonomy_class, row.code) == (
        "validation",
        "refuse",
        "SYNTACTIC_PARSE_FAIL",
        "parse_error",
    )
    assert row.contracts_digest == "digest" and row.call is not None and "arguments" not in row.call


def test_whatif_under_the_same_set_changes_nothing() -> None:
    policy = shipped_set()
    calls = [charge(1), charge(2, cents=600_000), charge(3, cents=1_100_000), call("invoice.fetch", 4)]
    _, rows = recorded_round(policy, calls)
    report = whatif.replay(rows, registry(), policy, revalidate=False)
    assert (report.replayed, report.unchanged, report.changes) == (4, 4, {})
    assert report.recorded_sets == {policy.digest: 4}
    assert any(text.startswith("usage as recorded") for text in report.as_json()["assumed"])


def test_whatif_reports_what_a_stricter_set_would_refuse(tmp_path: Path) -> None:
    calls = [charge(1, cents=50_000), charge(2, cents=125_000), charge(3, cents=600_000), call("invoice.fetch", 4)]
    _, rows = recorded_round(shipped_set(), calls)
    strict = stricter(tmp_path)
    report = whatif.replay(rows, registry(), strict, revalidate=False).as_json()
    assert (report["replayed"], report["unchanged"], report["changed"]) == (4, 2, 2)
    (change,) = report["changes"]
    assert (change["tool"], change["kind"], change["taxonomy_class"], change["count"]) == (
        "payment.charge_card",
        "allowed -> refused",
        "POLICY_VIOLATION",
        2,
    )
    assert [e["call_id"] for e in change["examples"]] == ["call_2", "call_3"]
    assert "charge-limit-1000" in change["examples"][0]["would be"]


def test_whatif_loosening_reports_refused_to_allowed(tmp_path: Path) -> None:
    _, rows = recorded_round(stricter(tmp_path), [charge(1, cents=600_000), charge(2, cents=50_000)])
    report = whatif.replay(rows, registry(), shipped_set(), revalidate=False).as_json()
    assert [(c["kind"], c["taxonomy_class"], c["count"]) for c in report["changes"]] == [
        ("refused -> allowed", "POLICY_VIOLATION", 1)
    ]


def test_whatif_reports_a_change_of_approvals(tmp_path: Path) -> None:
    _, rows = recorded_round(shipped_set(), [charge(1, cents=600_000), charge(2, cents=50_000)])
    stricter(tmp_path)
    (tmp_path / "strict.cedar").unlink()
    arguments = (tmp_path / "arguments.cedar").read_text()
    (tmp_path / "arguments.cedar").write_text(arguments.replace('@approvals("2")', '@approvals("3")'))
    report = whatif.replay(rows, registry(), load_policy_set(registry(), tmp_path), revalidate=False).as_json()
    (change,) = report["changes"]
    assert (change["kind"], change["taxonomy_class"], change["count"]) == ("approvals changed", "SUCCESS", 1)
    assert change["examples"][0] == {
        "call_id": "call_1",
        "tenant": "acme",
        "was": "allowed, 2 approvals",
        "would be": "allowed, 3 approvals",
    }


def test_the_whatif_command_refuses_a_set_it_cannot_admit_before_reading_anything(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from toolgate.cli.main import app

    (tmp_path / "bad.cedar").write_text('@id("x") permit (principal, action, resource) when { context.nope };')
    (tmp_path / "budgets.json").write_text(json.dumps(load_budgets().document))
    env = {"TOOLGATE_DATABASE_URL": "postgresql://nobody@127.0.0.1:9/none", "TOOLGATE_KAFKA_BOOTSTRAP": "127.0.0.1:9"}
    runner = CliRunner()
    refused = runner.invoke(app, ["whatif", "--policy", str(tmp_path)], env=env)
    assert refused.exit_code == 1 and "candidate refused" in refused.output, refused.output
    assert runner.invoke(app, ["whatif", "--policy", str(tmp_path / "none")], env=env).exit_code == 2
    assert runner.invoke(app, ["whatif", "--policy", str(tmp_path), "--since", "soon"], env=env).exit_code == 2


def test_whatif_notes_what_it_could_not_replay() -> None:
    policy = shipped_set()
    _, rows = recorded_round(policy, [charge(1)])
    bare = Decided("acme", "old", "policy", NOON, "invoice.fetch", "1.0.0", None, None, "allow", approvals=0)
    refused = Decided(
        "acme", "v", "validation", NOON, "invoice.fetch", "latest", "d", None, "refuse", "SCHEMA_VIOLATION"
    )
    report = whatif.replay([*rows, bare, refused], registry(), policy, revalidate=False).as_json()
    assert report["replayed"] == 1
    assumed = " | ".join(report["assumed"])
    assert f"{whatif.NO_CALL} (1 calls)" in assumed and f"{whatif.VALIDATION_REFUSED} (1 calls)" in assumed


def test_whatif_with_candidate_contracts_validates_the_arguments_again() -> None:
    policy = shipped_set()
    _, rows = recorded_round(policy, [charge(1)])
    (row,) = [r for r in rows if r.stage == "policy"]
    assert whatif.replay([row], registry(), policy, revalidate=True).unchanged == 1
    assert row.call is not None
    # arguments the contracts refuse (a string amount): refused at validation in the replay
    broken = dict(row.call, arguments={**row.call["arguments"], "amount_cents": "12"})
    report = whatif.replay([replace(row, call=broken)], registry(), policy, revalidate=True).as_json()
    (change,) = report["changes"]
    assert change["kind"] == "allowed -> refused" and change["taxonomy_class"] == "TYPE_MISMATCH"
    assert any(text.startswith("validation's semantic rules") for text in report["assumed"])


def test_whatif_treats_a_resource_the_record_lacks_as_missing_and_says_so() -> None:
    policy = shipped_set()
    _, rows = recorded_round(policy, [charge(1)])
    (row,) = [r for r in rows if r.stage == "policy"]
    assert row.facts is not None
    report = whatif.replay([replace(row, facts={**row.facts, "resources": []})], registry(), policy, False).as_json()
    (change,) = report["changes"]
    assert change["kind"] == "allowed -> refused" and change["taxonomy_class"] == "STALE_STATE"
    assert f"{whatif.UNRECORDED} (1 calls)" in report["assumed"]


@pytest.mark.parametrize(
    ("text", "seconds"), [("24h", 86_400), ("30m", 1800), ("7d", 604_800), ("90s", 90), ("15", 15)]
)
def test_since_reads_a_duration(text: str, seconds: float) -> None:
    assert whatif.duration_s(text) == seconds


@pytest.mark.parametrize("text", ["", "h", "-1h", "0m", "soon"])
def test_since_refuses_what_is_no_duration(text: str) -> None:
    with pytest.raises(ValueError):
        whatif.duration_s(text)


def test_an_admitted_set_is_the_same_version_as_its_files() -> None:
    policy = admit_set(
        [("rules.cedar", '@id("base") permit (principal, action, resource);')],
        ("budgets.json", json.dumps(load_budgets().document)),
        registry(),
    )
    assert len(policy.digest) == 64
