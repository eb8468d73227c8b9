"""CI's guard on the Kafka tier (.ci/ran_on_kafka.py): a tier that ran nothing, ran on another
broker than the cluster it names, or skipped a Kafka-only module, fails."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
MODULE = "tests/e2e/test_kafka_cluster.py"


def guard() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ran_on_kafka", REPO / ".ci" / "ran_on_kafka.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def report(tmp_path: Path, cases: str, broker: str = "kafka", brokers: int = 3, secure: bool = True) -> str:
    """A JUnit report as pytest writes it, with the suite's properties tests/conftest.py records."""
    path = tmp_path / "report.xml"
    ran = {"broker": broker, "brokers": brokers, "secure": secure}
    properties = "".join(f'<property name="{k}" value="{v}" />' for k, v in ran.items())
    path.write_text(
        f'<testsuites><testsuite name="pytest"><properties>{properties}</properties>{cases}</testsuite></testsuites>'
    )
    return str(path)


CLUSTER_RAN = '<testcase classname="tests.e2e.test_kafka_cluster" name="test_a" />'
CLUSTER_SKIPPED = '<testcase classname="tests.e2e.test_kafka_cluster" name="test_a"><skipped /></testcase>'
PIPELINE_RAN = '<testcase classname="tests.e2e.test_pipeline" name="test_b" />'


@pytest.mark.parametrize(
    ("cases", "code"),
    [
        (CLUSTER_RAN + PIPELINE_RAN, 0),
        (CLUSTER_SKIPPED + PIPELINE_RAN, 1),  # fell back to Tansu: the Kafka-only module skipped
        (PIPELINE_RAN, 1),  # the Kafka-only module not even collected
        ("", 1),  # nothing ran at all
    ],
)
def test_the_tier_passes_only_when_its_kafka_only_module_ran(tmp_path: Path, cases: str, code: int) -> None:
    assert guard().main([report(tmp_path, cases), "--brokers", "3", "--secure", "--module", MODULE]) == code


@pytest.mark.parametrize(
    ("ran", "code"),
    [
        ({}, 0),
        ({"broker": "tansu", "brokers": 1, "secure": False}, 1),  # the session fell back to the embedded broker
        ({"brokers": 1}, 1),  # one node, not the three the tier names
        ({"secure": False}, 1),  # an unsecured cluster
    ],
)
def test_the_tier_passes_only_on_the_cluster_it_names(tmp_path: Path, ran: dict[str, object], code: int) -> None:
    path = report(tmp_path, CLUSTER_RAN + PIPELINE_RAN, **ran)  # type: ignore[arg-type]
    assert guard().main([path, "--brokers", "3", "--secure", "--module", MODULE]) == code


def test_a_report_without_the_sessions_broker_fails(tmp_path: Path) -> None:
    path = tmp_path / "report.xml"
    path.write_text(f'<testsuites><testsuite name="pytest">{CLUSTER_RAN}</testsuite></testsuites>')
    assert guard().main([str(path), "--brokers", "3", "--secure"]) == 1


def test_failures_count_as_run_but_not_as_the_module_having_passed(tmp_path: Path) -> None:
    failed = '<testcase classname="tests.e2e.test_kafka_cluster" name="test_a"><failure message="x"/></testcase>'
    seen = guard().outcomes([report(tmp_path, failed)])
    assert seen[MODULE]["failed"] == 1 and seen[MODULE]["passed"] == 0
