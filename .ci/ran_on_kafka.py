"""Fail CI when the Kafka tier ran nothing: a JUnit report with no test that ran, or a Kafka-only
module whose tests were all skipped (they skip on Tansu, so a tier that silently fell back to the
embedded broker would pass without them).

    python .ci/ran_on_kafka.py REPORT.xml [REPORT.xml ...] --module tests/e2e/test_kafka_cluster.py
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("reports", nargs="+")
    parser.add_argument("--module", action="append", default=[], help="a Kafka-only test file that must have run")
    args = parser.parse_args(argv)
    seen = outcomes(args.reports)
    ran = sum(c["passed"] + c["failed"] for c in seen.values())
    problems = [] if ran else ["the Kafka tier ran no test"]
    problems += [f"{m}: no test of it ran on Kafka" for m in args.module if not seen.get(m, Counter())["passed"]]
    for line in problems:
        print(f"ran_on_kafka: {line}", file=sys.stderr)
    named = ", ".join(f"{m} {dict(seen.get(m, Counter()))}" for m in args.module)
    print(f"ran_on_kafka: {ran} tests ran on Kafka; {named}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
