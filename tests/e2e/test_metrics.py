"""Operations end to end: a real Prometheus server scraping the running `toolgate up`, and the
seeds' span attributes on the spans of one traced call.

The Prometheus server is Debian's (`prometheus`, which .ci/run installs; without CI a machine
that lacks it skips this module). It runs on a free port with a configuration of its own that
scrapes every worker's /metrics (the ports `runtime.json` lists) each second and evaluates the
real rules of ops/prometheus. The test drives calls of every outcome (success, refusals, an
approval granted and one denied, an idempotent replay, a dead letter), then asks Prometheus's
HTTP API whether every metric has series, and whether every dashboard panel's and every alert's
expression evaluates, with data where traffic was driven.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from toolgate.topics.catalog import Topics

from ..conftest import Pipeline, eventually
from .test_pipeline import _approval_of, _draft, taxonomy

pytestmark = pytest.mark.timeout(300)

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "ops" / "prometheus" / "toolgate-rules.yml"
DASHBOARD = REPO / "ops" / "grafana" / "dashboards" / "toolgate.json"
# Every metric the issue names, as Prometheus sees it (histograms by their buckets).
METRICS = (
    "tool_invocation_count_total",
    "tool_invocation_latency_milliseconds_bucket",
    "tool_invocation_cost_total",
    "tool_invocation_retries_total",
    "tool_invocation_timeouts_total",
    "tool_idempotency_replays_total",
    "tool_approval_pending_count",
    "tool_approval_resolution_time_milliseconds_bucket",
    "tool_schema_validation_failures_total",
    "tool_retry_budget_exhausted_total",
    "tool_mutation_class_violations_total",
    "tool_invocation_interim_total",
    "tool_validation_proposals_total",
    "tool_repair_loops_total",
    "tool_compensations_total",
    "tool_retry_attempts_total",
    "tool_verification_required_total",
    "tool_traces_total",
    "tool_contract_sunset_remaining_seconds",
    "toolgate_calls_total",
    "toolgate_round_duration_seconds_bucket",
    "toolgate_round_size_bucket",
    "toolgate_deadletters_total",
    "toolgate_consumer_lag",
    "toolgate_keys_pending",
    "toolgate_keys_pending_oldest_age_seconds",
    "toolgate_outbox_backlog",
    "toolgate_outbox_oldest_age_seconds",
    "toolgate_deadletters_open",
    "toolgate_audit_chain_head",
    "toolgate_audit_chain_ok",
    "toolgate_budget_spent",
)
SEED_ATTRIBUTES = (
    "gen_ai.operation.name",
    "tool.name",
    "tool.version",
    "tool.call_id",
    "tool.side_effect_class",
    "tool.validation.status",
    "tool.error_code",
    "tool.retryable",
    "tool.repairable",
    "tool.idempotency_key_hash",
    "tool.approval_id",
    "tenant.id",
    "trace.replayable",
    "tool.contract.version",
    "tool.auth_profile",
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Prometheus:
    def __init__(self, url: str) -> None:
        self.url = url

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector of `expr`; AssertionError naming it when Prometheus refuses it."""
        query = urllib.parse.urlencode({"query": expr})
        try:
            with urllib.request.urlopen(f"{self.url}/api/v1/query?{query}", timeout=10) as response:
                answer = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raise AssertionError(f"{expr!r}: {exc.read().decode()}") from exc
        assert answer["status"] == "success", f"{expr!r}: {answer}"
        return list(answer["data"]["result"])

    def total(self, expr: str) -> float:
        """The sum of `expr`'s samples (0 when it has none)."""
        return sum(float(sample["value"][1]) for sample in self.query(expr))

    def targets_up(self) -> int:
        with urllib.request.urlopen(f"{self.url}/api/v1/targets", timeout=10) as response:
            active = json.loads(response.read())["data"]["activeTargets"]
        return sum(1 for t in active if t["health"] == "up")


@pytest.fixture(scope="module")
def prometheus(pipeline: Pipeline, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    binary = shutil.which("prometheus")
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("prometheus is missing; .ci/run installs Debian's prometheus package")
        pytest.skip("the prometheus server is not installed (apt-get install prometheus)")
    home = tmp_path_factory.mktemp("prometheus")
    ports = pipeline.refresh_runtime()["metrics"]
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(RULES)],
        "scrape_configs": [
            {
                "job_name": "toolgate",
                "static_configs": [
                    {"targets": [f"127.0.0.1:{port}"], "labels": {"service": stage}} for stage, port in ports.items()
                ],
            }
        ],
    }
    (home / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = _free_port()
    with open(home / "prometheus.log", "wb") as log:
        process = subprocess.Popen(
            [
                binary,
                f"--config.file={home / 'prometheus.yml'}",
                f"--storage.tsdb.path={home / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        server = Prometheus(f"http://127.0.0.1:{port}")
        eventually(lambda: _answers(server) and server.targets_up() == len(ports), timeout=60)
        yield server
    finally:
        process.terminate()
        process.wait(30)


def _answers(server: Prometheus) -> bool:
    try:
        with urllib.request.urlopen(f"{server.url}/-/ready", timeout=5) as response:
            return bool(response.status == 200)
    except OSError:  # not listening yet, or 503 while it starts
        return False


def _drive_every_outcome(pipeline: Pipeline) -> None:
    """Success, refusals, an approval granted and one denied, a replay, and a dead letter."""
    assert taxonomy(pipeline.call("invoice.fetch", {"invoice_id": "inv_acme0001"})) == "SUCCESS"
    assert taxonomy(pipeline.call("invoice.fetch", {"invoice_id": 5})) == "TYPE_MISMATCH"
    denied = pipeline.call("invoice.fetch", {"invoice_id": "inv_acme0001"}, scopes=["notify:send"])
    assert taxonomy(denied) == "PERMISSION_DENIED"
    run_id, operation = f"run_{uuid.uuid4().hex[:10]}", f"op_{uuid.uuid4().hex[:10]}"
    draft = _draft(run_id, operation)
    sent = [pipeline.propose("invoice.create_draft", draft, run_id=run_id, logical_operation_id=operation)]
    sent.append(pipeline.propose("invoice.create_draft", draft, run_id=run_id, logical_operation_id=operation))
    assert [pipeline.wait(s)["execution_metadata"]["idempotency_hit"] for s in sent] == [False, True]
    email = {"to": "ap@coyote.example", "subject": "Invoice inv_acme0001", "body": "A reminder."}
    held = pipeline.propose("notify.send_email", email, idempotency_key=f"deny-{uuid.uuid4().hex}")
    refused = pipeline.cli("approvals", "deny", _approval_of(pipeline, held), "--as", "carol", "--reason", "no")
    assert refused.returncode == 0, refused.stderr
    assert taxonomy(pipeline.wait(held)) == "CONFIRMATION_MISSING"
    pipeline.client.publish_raw(Topics().proposals, b"garbage", secrets.token_bytes(48))
    pipeline.client.flush()


def test_prometheus_sees_every_metric_panel_and_alert(pipeline: Pipeline, prometheus: Prometheus) -> None:
    _drive_every_outcome(pipeline)
    _approved_email(pipeline)

    def missing() -> list[str]:
        return [name for name in METRICS if not prometheus.query(f'count({{__name__="{name}"}})')]

    eventually(lambda: not missing(), timeout=90)
    calls = prometheus.query("sum by (taxonomy_class) (tool_invocation_count_total)")
    assert {"SUCCESS", "TYPE_MISMATCH", "PERMISSION_DENIED", "CONFIRMATION_MISSING"} <= {
        c["metric"]["taxonomy_class"] for c in calls
    }
    assert eventually(lambda: prometheus.query('sum(tool_idempotency_replays_total{tool="invoice.create_draft"}) > 0'))

    def resolutions() -> set[str]:
        found = prometheus.query("sum by (resolution) (tool_approval_resolution_time_milliseconds_count)")
        return {r["metric"]["resolution"] for r in found}

    eventually(lambda: {"APPROVED", "DENIED"} <= resolutions(), timeout=60)
    panels = _panel_expressions()

    def empty() -> list[tuple[str, str]]:
        return [(panel, expr) for panel, expr in panels if not prometheus.query(expr)]

    deadline = time.monotonic() + 60
    while (blank := empty()) and time.monotonic() < deadline:
        time.sleep(1)
    assert not blank, f"panels that show nothing: {blank}"
    for group in yaml.safe_load(RULES.read_text())["groups"]:
        for rule in group["rules"]:
            prometheus.query(rule["expr"])  # evaluates without error
    firing = eventually(lambda: prometheus.query('ALERTS{alertname="DeadLettersArriving",stage="validation"}'))
    assert firing, "a dead letter arrived, and DeadLettersArriving did not fire"


def _panel_expressions() -> list[tuple[str, str]]:
    dashboard = json.loads(DASHBOARD.read_text())
    found = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            found.append((panel["title"], target["expr"].replace("$__rate_interval", "1m")))
    assert len(found) >= 20
    return found


def _approved_email(pipeline: Pipeline) -> tuple[Any, str, str]:
    key = f"email-{uuid.uuid4().hex}"
    email = {"to": "ap@coyote.example", "subject": "Invoice inv_acme0002", "body": "A friendly reminder."}
    sent = pipeline.propose("notify.send_email", email, idempotency_key=key)
    approval_id = _approval_of(pipeline, sent)
    approved = pipeline.cli("approvals", "approve", approval_id, "--as", "carol")
    assert approved.returncode == 0, approved.stderr
    assert taxonomy(pipeline.wait(sent)) == "SUCCESS"
    return sent, key, approval_id


def _spans_of(home: Path, trace_id: str) -> list[dict[str, Any]]:
    spans = []
    for path in (home / "telemetry").glob("spans-*.jsonl"):
        spans += [json.loads(line) for line in path.read_text().splitlines() if trace_id in line]
    return [s for s in spans if s["trace_id"] == trace_id]


def test_every_seed_span_attribute_on_the_spans_of_one_traced_call(pipeline: Pipeline) -> None:
    sent, key, approval_id = _approved_email(pipeline)
    trace_id = sent.traceparent.split("-")[1]
    stages = {"validation", "policy", "approval-wait", "execution", "normalization"}

    def spans() -> list[dict[str, Any]]:
        found = _spans_of(pipeline.home, trace_id)
        done = {s["attributes"]["toolgate.stage"] for s in found}
        return found if stages <= done and len(found) >= 6 else []  # normalization twice: interim, final

    found = eventually(spans, timeout=30)
    for span in found:
        attributes = span["attributes"]
        assert set(SEED_ATTRIBUTES) <= set(attributes), f"{span['name']} lacks {set(SEED_ATTRIBUTES) - set(attributes)}"
        assert attributes["gen_ai.operation.name"] == "execute_tool"
        assert (attributes["tool.name"], attributes["tool.version"]) == ("notify.send_email", "1.0.0")
        assert attributes["tool.call_id"] == sent.call_id and attributes["tenant.id"] == "acme"
        assert attributes["tool.side_effect_class"] == "HIGH_RISK_EXTERNAL"
        assert attributes["tool.auth_profile"] == "bearer" and attributes["trace.replayable"] is True
        if attributes["toolgate.stage"] != "normalization":  # a result carries no key
            assert attributes["tool.idempotency_key_hash"] == hashlib.sha256(f"acme\x00{key}".encode()).hexdigest()[:32]
    by_stage = {(s["attributes"]["toolgate.stage"], s["attributes"]["tool.validation.status"]) for s in found}
    assert ("validation", "passed") in by_stage and ("approval-wait", "approval_pending") in by_stage
    [execution] = [s for s in found if s["attributes"]["toolgate.stage"] == "execution"]
    assert execution["attributes"]["tool.approval_id"] == approval_id
    assert execution["attributes"]["tool.error_code"] == "" and execution["attributes"]["tool.retryable"] is False
    held = [s["attributes"] for s in found if s["attributes"]["tool.validation.status"] == "approval_pending"]
    assert {a["toolgate.stage"] for a in held} == {"approval-wait", "normalization"}  # the hold, and its interim
    assert all(a["tool.validation.status"] == "approval_pending" and a["tool.error_code"] == "" for a in held)
    text = json.dumps(found)
    token = (pipeline.home / "secrets" / "demo-provider-token").read_text().strip()
    assert key not in text and token not in text  # the key only as its hash; never a secret


def test_a_held_then_approved_call_counts_as_one_invocation(pipeline: Pipeline, prometheus: Prometheus) -> None:
    """Review 2026-11-28 row 18: normalization counted the interim answer of a held call
    (CONFIRMATION_MISSING, 202) as an invocation too, so a held call that was approved counted
    two. It counts one, at its final observation, and its interim observation apart."""
    email = 'tool="notify.send_email"'
    ended, succeeded = f"tool_invocation_count_total{{{email}}}", f'tool_invocation_count_total{{{email},status="ok"}}'
    interim = f'tool_invocation_interim_total{{{email},kind="approval_pending"}}'
    time.sleep(3)  # what earlier tests' calls counted is scraped (every second) before counting starts
    before = {expr: prometheus.total(expr) for expr in (ended, succeeded, interim)}
    _approved_email(pipeline)  # held, approved, SUCCESS
    eventually(lambda: prometheus.total(succeeded) == before[succeeded] + 1, timeout=30)
    time.sleep(3)  # anything else the call counts is scraped too
    assert prometheus.total(ended) == before[ended] + 1, "a held call that was approved counts one invocation"
    assert prometheus.total(interim) == before[interim] + 1, "its interim observation counts apart"


def test_a_call_without_a_key_carries_its_derived_keys_hash_from_validation_on(pipeline: Pipeline) -> None:
    """Review 2026-11-28 §(b): `tool.idempotency_key_hash` was empty for a mutation whose agent
    named no key. Validation derives it; from validation's span on, every stage's span carries
    its hash, and the call is replayable at each."""
    run_id, operation = f"run_{uuid.uuid4().hex[:10]}", f"op_{uuid.uuid4().hex[:10]}"
    sent = pipeline.propose(
        "invoice.create_draft", _draft(run_id, operation), run_id=run_id, logical_operation_id=operation
    )
    assert taxonomy(pipeline.wait(sent)) == "SUCCESS"
    trace_id = sent.traceparent.split("-")[1]
    stages = {"validation", "policy", "approval-wait", "execution"}

    def spans() -> list[dict[str, Any]]:
        found = [s["attributes"] for s in _spans_of(pipeline.home, trace_id)]
        return found if stages | {"normalization"} <= {a["toolgate.stage"] for a in found} else []

    found = eventually(spans, timeout=30)
    hashes = {a["tool.idempotency_key_hash"] for a in found if a["toolgate.stage"] in stages}
    assert len(hashes) == 1 and "" not in hashes, hashes
    assert all(a["trace.replayable"] is True for a in found)


def test_compensations_count_once_each_by_how_they_ended(pipeline: Pipeline, prometheus: Prometheus) -> None:
    """Execution counts a compensation that ran (seed 000's Compensation Success Rate): one that
    undid its call, one that failed, and not the same compensation sent again (a replay)."""
    undone = 'tool_compensations_total{tool="invoice.void_draft",result="%s"}'
    time.sleep(3)
    before = {end: prometheus.total(undone % end) for end in ("succeeded", "failed")}
    drafts = []
    for _ in range(2):
        run_id, operation = f"run_{uuid.uuid4().hex[:10]}", f"op_{uuid.uuid4().hex[:10]}"
        sent = pipeline.propose(
            "invoice.create_draft", _draft(run_id, operation), run_id=run_id, logical_operation_id=operation
        )
        drafts.append((sent, pipeline.wait(sent)["result_payload"]["data"]["invoice_id"]))
    (kept, _), (finalized, invoice_id) = drafts
    for _ in range(2):  # compensating twice is one compensation; the second is answered from its key
        assert pipeline.cli("compensate", kept.call_id, "--json").returncode == 0
    pipeline.sql("UPDATE demo.invoices SET status = 'open' WHERE invoice_id = %s", (invoice_id,))  # finalized
    assert pipeline.cli("compensate", finalized.call_id, "--json").returncode == 0
    eventually(lambda: prometheus.total(undone % "failed") == before["failed"] + 1, timeout=30)
    time.sleep(3)
    assert prometheus.total(undone % "succeeded") == before["succeeded"] + 1


def test_a_repaired_proposal_counts_a_repair_loop_triggered_then_repaired(
    pipeline: Pipeline, prometheus: Prometheus
) -> None:
    """Validation counts what its gates found (seed 000's first-pass schema valid and repair
    rates): a first attempt with the wrong type triggers a loop; the repair that passes ends it."""
    loops = 'tool_repair_loops_total{tool="invoice.fetch",event="%s"}'
    invalid = 'tool_validation_proposals_total{tool="invoice.fetch",attempt="first",schema="invalid"}'
    repaired = 'tool_validation_proposals_total{tool="invoice.fetch",attempt="repair",schema="valid",semantic="valid"}'
    series = (loops % "triggered", loops % "repaired", invalid, repaired)
    time.sleep(3)
    before = {expr: prometheus.total(expr) for expr in series}
    run = {"run_id": f"run_{uuid.uuid4().hex[:10]}", "logical_operation_id": f"op_{uuid.uuid4().hex[:10]}"}
    assert taxonomy(pipeline.call("invoice.fetch", {"invoice_id": 5}, **run)) == "TYPE_MISMATCH"
    fixed = pipeline.call("invoice.fetch", {"invoice_id": "inv_acme0001"}, repair_attempt=1, **run)
    assert taxonomy(fixed) == "SUCCESS"
    eventually(lambda: prometheus.total(loops % "repaired") == before[loops % "repaired"] + 1, timeout=30)
    time.sleep(3)
    assert {expr: prometheus.total(expr) - before[expr] for expr in series} == dict.fromkeys(series, 1.0)
