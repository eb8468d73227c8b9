"""Fail CI when the Kafka tier did not run on the cluster it names: a JUnit report whose session
ran on another broker (tests/conftest.py records the session's broker, its node count and whether
it ran secured as properties of the report's suite), a report with no test that ran, or a
Kafka-only module whose tests were all skipped (they skip on Tansu).

    python .ci/ran_on_kafka.py REPORT.xml [REPORT.xml ...] --brokers 3 --secure \
        --module tests/e2e/test_kafka_cluster.py
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections import Counter


def outcomes(paths: list[str]) -> dict[str, Counter[str]]:
    """Per test file (from each case's classname), how many cases passed, failed or were skipped."""
    seen: dict[str, Counter[str]] = {}
    for path in paths:
        for case in ET.parse(path).getroot().iter("testcase"):
            module = case.get("classname", "").replace(".", "/") + ".py"
            kinds = {child.tag for child in case}
            outcome = "skipped" if "skipped" in kinds else "failed" if kinds & {"failure", "error"} else "passed"
            seen.setdefault(module, Counter())[outcome] += 1
    return seen


def sessions(path: str) -> list[dict[str, str]]:
    """The properties of each suite of a report (one per pytest session)."""
    return [
        {p.get("name", ""): p.get("value", "") for p in suite.iter("property")}
        for suite in ET.parse(path).getroot().iter("testsuite")
    ]


def off_cluster(path: str, brokers: int, secure: bool) -> list[str]:
    """What is wrong with where `path`'s sessions ran, against the cluster the tier names."""
    wanted = {"broker": "kafka", "brokers": str(brokers), "secure": str(secure)}
    found = sessions(path) or [{}]
    return [
        f"{path}: its session ran on { ({k: ran.get(k) for k in wanted}) }, not {wanted}"
        for ran in found
        if {k: ran.get(k) for k in wanted} != wanted
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("reports", nargs="+")
    parser.add_argument("--brokers", type=int, default=1, help="the nodes the tier's sessions must have run on")
    parser.add_argument("--secure", action="store_true", help="the tier's sessions must have run secured")
    parser.add_argument("--module", action="append", default=[], help="a Kafka-only test file that must have run")
    args = parser.parse_args(argv)
    seen = outcomes(args.reports)
    ran = sum(c["passed"] + c["failed"] for c in seen.values())
    problems = [] if ran else ["the Kafka tier ran no test"]
    problems += [line for path in args.reports for line in off_cluster(path, args.brokers, args.secure)]
    problems += [f"{m}: no test of it ran on Kafka" for m in args.module if not seen.get(m, Counter())["passed"]]
    for line in problems:
        print(f"ran_on_kafka: {line}", file=sys.stderr)
    named = ", ".join(f"{m} {dict(seen.get(m, Counter()))}" for m in args.module)
    print(f"ran_on_kafka: {ran} tests ran on Kafka; {named}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
