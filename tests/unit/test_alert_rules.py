"""ops/prometheus's rules, their promtool unit tests and the runbooks they point at.

promtool (Debian's `prometheus` package) checks the rules and runs the unit tests of every
alert. `.ci/run` installs it and sets CI, so there the test fails when promtool is missing; on
a workstation without it the two promtool tests are skipped, and say so.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import typer.main
import yaml

from toolgate.cli.main import app
from toolgate.telemetry.metrics_export import MS_BUCKETS
from toolgate.workers.execution.retry import TIMEOUT_CLASS_MS

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "ops" / "prometheus" / "toolgate-rules.yml"
RULE_TESTS = REPO / "ops" / "prometheus" / "toolgate-rules.test.yml"
RUNBOOKS = REPO / "ops" / "runbooks"
DASHBOARD = REPO / "ops" / "grafana" / "dashboards" / "toolgate.json"
ALERTS: dict[str, dict[str, Any]] = {
    rule["alert"]: rule
    for group in yaml.safe_load(RULES.read_text())["groups"]
    for rule in group["rules"]
    if "alert" in rule
}
# The seeds' alerts (tool-contract chapter) and toolgate's own.
EXPECTED = {
    "ToolDegraded",
    "LatencyRegression",
    "TimeoutClassMismatch",
    "TimeoutClassReclassify",
    "ApprovalQueueBacklog",
    "RetryBudgetExhausted",
    "OutputSchemaViolations",
    "MutationClassViolation",
    "DeprecationRemovalBlocked",
    "StageLag",
    "KeysStuckPending",
    "DeadLettersArriving",
    "OutboxNotDraining",
    "AuditChainBroken",
}


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("promtool is missing; .ci/run installs Debian's prometheus package")
        pytest.skip("promtool is not installed (apt-get install prometheus)")
    return found


def test_every_alert_the_issue_names_is_defined() -> None:
    assert set(ALERTS) == EXPECTED


def test_promtool_accepts_the_rules() -> None:
    done = subprocess.run([promtool(), "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_alert_fires_and_stays_quiet_in_promtools_unit_tests() -> None:
    done = subprocess.run(
        [promtool(), "test", "rules", RULE_TESTS.name],
        cwd=RULE_TESTS.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr


SUGGESTED = "tool:invocation_timeout_class_suggested:rate5m"


def _suggested_bounds() -> dict[str, tuple[int, int | None]]:
    """Each class the suggestion rule names, with the p99 range it takes: [at least, under)."""
    [rule] = [
        r
        for group in yaml.safe_load(RULES.read_text())["groups"]
        for r in group["rules"]
        if r.get("record") == SUGGESTED
    ]
    arms = re.findall(
        r'label_replace\(tool:invocation_latency_p99:rate5m((?:\s*[<>]=?\s*[\d.]+)*),\s*"suggested_class",\s*"(\w+)"',
        rule["expr"],
    )
    bounds: dict[str, tuple[int, int | None]] = {}
    for comparisons, name in arms:
        at_least = re.findall(r">=\s*(\d+)", comparisons)
        under = re.findall(r"<\s*(\d+)", comparisons)
        assert len(re.findall(r"[<>]=?", comparisons)) == len(at_least) + len(under), comparisons
        bounds[name] = (int(at_least[0]) if at_least else 0, int(under[0]) if under else None)
    return bounds


def test_the_suggested_timeout_class_has_executions_bounds() -> None:
    """The rule's classes are TIMEOUT_CLASS_MS's, each taking the p99s from the class below's
    ceiling up to (not including) its own: a p99 at a ceiling is the next class's, the longest
    class takes the rest. The two cannot drift apart."""
    ordered = sorted(TIMEOUT_CLASS_MS, key=TIMEOUT_CLASS_MS.__getitem__)
    floors = [0, *(TIMEOUT_CLASS_MS[name] for name in ordered[:-1])]
    ceilings: list[int | None] = [*(TIMEOUT_CLASS_MS[name] for name in ordered[:-1]), None]
    assert _suggested_bounds() == dict(zip(ordered, zip(floors, ceilings, strict=True), strict=True))


def test_the_latency_histogram_can_tell_the_classes_apart() -> None:
    """Every ceiling the rule compares a p99 with is a bucket bound of the latency histogram, so
    a latency just past a ceiling is counted past it; histogram_quantile reads a p99 past the
    last bucket as that bucket's bound, which then falls in the longest class."""
    compared = sorted(TIMEOUT_CLASS_MS.values())[:-1]
    assert set(compared) <= set(MS_BUCKETS)
    assert max(MS_BUCKETS) >= compared[-1]


def test_a_reclassification_is_recommended_only_past_the_mismatch_threshold() -> None:
    """TimeoutClassReclassify reads the timeout ratio with TimeoutClassMismatch's threshold."""

    def threshold(alert: str) -> str:
        [found] = re.findall(r"tool:invocation_timeout_ratio:rate5m\)? > ([\d.]+)", ALERTS[alert]["expr"])
        return found

    assert threshold("TimeoutClassReclassify") == threshold("TimeoutClassMismatch")
    assert ALERTS["TimeoutClassReclassify"]["labels"]["recommendation"] == "RECLASSIFY_TIMEOUT"


# Seed 000's rates recorded in the first group, beside what its alerts read.
SEED_RATES_BEFORE = {
    "tool:validation_failure_ratio:rate5m",
    "tool:unauthorized_proposal_ratio:rate5m",
    "tool:policy_violation_ratio:rate5m",
    "tool:idempotency_replay_ratio:rate5m",
}


def test_every_seed_rate_rule_has_a_promtool_test() -> None:
    """Each recording rule of the seeds' rates is evaluated over known counters in a promtool
    test, and the test names it."""
    groups = {group["name"]: group["rules"] for group in yaml.safe_load(RULES.read_text())["groups"]}
    tested = {
        case["expr"].split("{")[0]
        for test in yaml.safe_load(RULE_TESTS.read_text())["tests"]
        for case in test.get("promql_expr_test", [])
        if case.get("exp_samples")
    }
    rates = {rule["record"] for rule in groups["toolgate-seed-rates"]} | SEED_RATES_BEFORE
    assert len(rates) >= 25
    assert rates - tested == set()


def test_the_dashboard_shows_every_seed_rate() -> None:
    shown = " ".join(
        target["expr"] for panel in json.loads(DASHBOARD.read_text())["panels"] for target in panel.get("targets", [])
    )
    groups = {group["name"]: group["rules"] for group in yaml.safe_load(RULES.read_text())["groups"]}
    rates = {rule["record"] for rule in groups["toolgate-seed-rates"]} | SEED_RATES_BEFORE
    assert {rate for rate in rates if rate not in shown} == set()


def test_every_alert_has_a_firing_and_a_quiet_case() -> None:
    cases: dict[str, set[bool]] = {}
    for test in yaml.safe_load(RULE_TESTS.read_text())["tests"]:
        for case in test.get("alert_rule_test", []):
            cases.setdefault(case["alertname"], set()).add(bool(case.get("exp_alerts")))
    for name in ALERTS:
        assert cases.get(name) == {True, False}, f"{name} needs a test that fires and one that stays quiet"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_alert_has_a_runbook_with_the_three_sections(name: str) -> None:
    url = ALERTS[name]["annotations"]["runbook_url"]
    assert url == f"ops/runbooks/{name}.md"
    text = (REPO / url).read_text()
    for section in ("## What it means", "## How to confirm", "## What to do"):
        assert section in text, f"{url} lacks {section!r}"
    assert commands_in(text), f"{url} names no toolgate command"


def commands_in(markdown: str) -> list[list[str]]:
    """Every `toolgate ...` command of a runbook: lines of its sh blocks and inline code."""
    found = []
    for block in re.findall(r"```sh\n(.*?)```", markdown, re.S):
        found += [line.split("#")[0].split("|")[0] for line in block.splitlines() if line.startswith("toolgate ")]
    found += re.findall(r"`(toolgate [^`]+)`", markdown)
    return [shlex.split(re.sub(r"<(\w+)>", r"\1", command))[1:] for command in found]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_runbook_commands_are_real_cli_commands(name: str) -> None:
    cli = typer.main.get_command(app)
    for args in commands_in((RUNBOOKS / f"{name}.md").read_text()):
        group: Any = cli
        while hasattr(group, "commands") and args and args[0] in group.commands:
            group, args = group.commands[args[0]], args[1:]
        assert group is not cli, f"{name}: no such command in {args}"
        assert not hasattr(group, "commands"), f"{name}: {group.name} needs a subcommand"
        group.make_context(group.name, list(args))  # parses options and arguments as the CLI would
