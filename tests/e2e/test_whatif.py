"""Every decision names its inputs, and what-if over them (issue 51, parts 3 and 6), through the
real broker and Postgres of the session's `toolgate up`: calls flow, each stage's decision is
recorded naming the contracts' digest and the policy set's (the set `toolgate policy show`
prints); then `toolgate whatif --policy STRICTER` reports the calls the stricter set would refuse
(a USD 1,250 charge, under a forbid over USD 1,000) and not the others, says what it assumed, and
changes nothing: the row counts of every toolgate table and the end offsets of every topic are
what they were before it ran."""

from __future__ import annotations

import json
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from toolgate.kafka_security import ADMIN

from ..conftest import Pipeline
from .test_pipeline import taxonomy

pytestmark = pytest.mark.timeout(240)

SHIPPED = Path(__file__).resolve().parents[2] / "contracts" / "cedar"
STRICT = (
    '@id("charge-over-1000") @message("no card charge over 1,000 USD")\n'
    'forbid (principal, action in Action::"payment.charge_card", resource)\n'
    'when { context.arguments.currency == "USD" && context.arguments.amount_cents > 100000 };\n'
)


# The reconciliation worker's tree heads summarize audit rows already written, up to
# TOOLGATE_AUDIT_TREE_SECONDS after them, whatever else runs: checked apart (`summarized`).
SUMMARIES = {"audit_tree_heads"}


def tables(pipeline: Pipeline) -> dict[str, int]:
    names = pipeline.sql("SELECT tablename FROM pg_tables WHERE schemaname = 'toolgate' ORDER BY 1")
    counted = [n for (n,) in names if n not in SUMMARIES]
    return {n: int(pipeline.sql(f"SELECT count(*) FROM toolgate.{n}")[0][0]) for n in counted}


def summarized(pipeline: Pipeline) -> int:
    """How many audit rows the newest tree head covers."""
    return int(pipeline.sql("SELECT coalesce(max(tree_size), 0) FROM toolgate.audit_tree_heads")[0][0])


def offsets(pipeline: Pipeline) -> dict[tuple[str, int], int]:
    consumer = Consumer({**pipeline.kafka(ADMIN), "group.id": f"pytest-ends-{uuid.uuid4().hex[:8]}"})
    try:
        topics = consumer.list_topics(timeout=10).topics
        return {
            (name, p): consumer.get_watermark_offsets(TopicPartition(name, p), timeout=10)[1]
            for name, topic in sorted(topics.items())
            if not name.startswith("__")
            for p in topic.partitions
        }
    finally:
        consumer.close()


def quiet(pipeline: Pipeline) -> tuple[dict[str, int], dict[tuple[str, int], int]]:
    """Postgres's row counts and the topics' ends, once two looks a second apart agree."""
    before = (tables(pipeline), offsets(pipeline))
    for _ in range(30):
        time.sleep(1.0)
        now = (tables(pipeline), offsets(pipeline))
        if now == before:
            return now
        before = now
    raise AssertionError("the pipeline never went quiet")


def recorded(pipeline: Pipeline, call_id: str) -> dict[str, tuple[Any, ...]]:
    rows = pipeline.sql(
        "SELECT stage, outcome, contracts_digest, policy_digest, code FROM toolgate.call_decisions WHERE call_id = %s",
        (call_id,),
    )
    return {r[0]: r[1:] for r in rows}


def test_decisions_are_recorded_and_whatif_reports_a_stricter_set_changing_nothing(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    # The window whatif reads reaches up to 2 s before `began`: the session's earlier calls must
    # all be decided before that, or one of them is replayed too.
    quiet(pipeline)
    time.sleep(2.5)
    began = time.time()
    shown = pipeline.cli("policy", "show", "--json")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    enforcing = json.loads(shown.stdout)["digest"]

    fetch = pipeline.propose("invoice.fetch", {"invoice_id": pipeline.open_invoice()})
    small = {"invoice_id": pipeline.open_invoice(amount_cents=50_000), "amount_cents": 50_000, "currency": "USD"}
    large = {"invoice_id": pipeline.open_invoice(amount_cents=125_000), "amount_cents": 125_000, "currency": "USD"}
    huge = {"invoice_id": pipeline.open_invoice(amount_cents=1_500_000), "amount_cents": 1_500_000, "currency": "USD"}
    dry_small = pipeline.propose("payment.charge_card", small, dry_run=True)
    dry_large = pipeline.propose("payment.charge_card", large, dry_run=True)
    refused = pipeline.propose("payment.charge_card", huge)
    invalid = pipeline.propose("invoice.fetch", {"invoice_id": 7})
    outcomes = [taxonomy(pipeline.wait(sent)) for sent in (fetch, dry_small, dry_large, refused, invalid)]
    assert outcomes == ["SUCCESS", "SUCCESS", "SUCCESS", "POLICY_VIOLATION", "TYPE_MISMATCH"]

    # Each stage's decision, naming the versions that made it.
    for sent in (fetch, dry_small, dry_large):
        found = recorded(pipeline, sent.call_id)
        assert found["policy"][:1] == ("allow",) and found["policy"][2] == enforcing, found
        assert found["policy"][1] is not None and len(found["policy"][1]) == 64
        assert "validation" not in found, found  # its pass is in the policy's record, as `decided` shows
        shown = pipeline.cli("policy", "decided", sent.call_id, "--json")
        assert shown.returncode == 0, shown.stderr
        passed = [(d["outcome"], d["contracts_digest"]) for d in json.loads(shown.stdout) if d["stage"] == "validation"]
        assert passed == [("pass", found["policy"][1])], shown.stdout
    assert recorded(pipeline, refused.call_id)["policy"][0::3] == ("refuse", "policy.charge-hard-limit")
    assert recorded(pipeline, invalid.call_id)["validation"][0::3] == ("refuse", "type_mismatch")
    decided = pipeline.cli("policy", "decided", dry_large.call_id, "--json")
    assert decided.returncode == 0, decided.stderr
    [policy] = [d for d in json.loads(decided.stdout) if d["stage"] == "policy"]
    assert policy["call"]["arguments"] == large and policy["approvals"] == 2
    rows = [r["row"] for r in policy["facts"]["resources"]]  # the tenant binding's lookup and the state check's
    assert rows and all(r["tenant_id"] == "acme" for r in rows)
    assert any(r.get("amount_cents") == 125_000 for r in rows), rows

    stricter = tmp_path / "stricter"
    shutil.copytree(SHIPPED, stricter)
    (stricter / "strict.cedar").write_text(STRICT)
    before = quiet(pipeline)
    since = lambda: f"{int(time.time() - began) + 2}s"  # noqa: E731 (this test's calls only)
    done = pipeline.cli("whatif", "--policy", str(stricter), "--since", since(), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    after = (tables(pipeline), offsets(pipeline))
    assert after == before, "whatif changed Postgres or a topic"
    assert summarized(pipeline) <= before[0]["audit_log"]  # a head since covers only rows from before

    report = json.loads(done.stdout)
    assert report["recorded_sets"] == {enforcing: 4} and report["candidate"] != enforcing
    assert (report["replayed"], report["unchanged"], report["changed"]) == (4, 3, 1)
    [change] = report["changes"]
    assert (change["tool"], change["kind"], change["taxonomy_class"], change["count"]) == (
        "payment.charge_card",
        "allowed -> refused",
        "POLICY_VIOLATION",
        1,
    )
    [example] = change["examples"]
    assert example["call_id"] == dry_large.call_id and "charge-over-1000" in example["would be"]
    assumed = " | ".join(report["assumed"])
    assert "usage as recorded" in assumed and "refused by validation" in assumed

    text = pipeline.cli("whatif", "--policy", str(stricter), "--since", since())
    assert text.returncode == 0 and dry_large.call_id in text.stdout, text.stdout + text.stderr
