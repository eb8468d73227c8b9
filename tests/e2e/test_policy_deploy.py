"""Policy sets deployed while everything runs (issue 51, parts 4 and 5), through a real `toolgate
up` of this module's own (a deploy changes what every later call meets):

* calls flow while a stricter set is deployed (`toolgate policy deploy`): every call is decided
  by exactly one set, named in its record (the policy decision's `set:` detail of an allowed
  call, the refusal's audit entry of a refused one); once the new set appears it is the only one,
  and every call proposed after the deploy returned is refused by the new rule;
* a set that cannot be admitted is refused at deploy (every problem named, exit 1), stored
  nowhere, and the workers keep deciding with the set they hold;
* a row written straight into `toolgate.policy_deployments` (a forged signature, or a genuine
  signature copied under another id) is not taken: the table proves nothing, a signature does;
* a policy worker that starts again takes the deployed set, not its TOOLGATE_POLICY_DIR's;
* a deployed rule on the resource a call names (the invoice a charge pays, its row read by the
  round) refuses a charge above its invoice and lets one of its amount through;
* a shadow set stricter than the enforcing one changes no decision; its disagreements are
  recorded, counted on the policy worker's /metrics and listed by `toolgate policy shadow
  report`; after `shadow stop` no more are recorded.

The traffic is dry runs of invoice.fetch: a dry run goes through policy as a call does, and its
preview shows the policy stage's decision detail (workers/execution/preview.py)."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from toolgate.contracts.budgets import budgets_file
from toolgate.contracts.cedar_policy import policy_files

from ..conftest import Pipeline, eventually, started
from .test_audit_anchor import worker_database_url
from .test_pipeline import errors_of, taxonomy

pytestmark = pytest.mark.timeout(300)

PAUSE_FETCH = """
@id("fetch-paused")
@message("invoice.fetch is paused")
forbid (principal, action in Action::"invoice.fetch", resource);
"""
BAD = """
@id("wrong-argument")
@message("no fetch of large invoices")
forbid (principal, action in Action::"invoice.fetch", resource) when { context.arguments.amount_cents > 1 };

@id("no-count")
@approvals("two")
permit (principal, action in Action::"payment.charge_card", resource) when { principal in resource.tenant };
"""
FETCH = {"invoice_id": "inv_acme0001"}
NOT_ABOVE = """
@id("not-above-the-invoice")
@message("a charge may not exceed its invoice")
forbid (principal, action in Action::"payment.charge_card", resource)
when { resource has amount_cents && context.arguments.amount_cents > resource.amount_cents };
"""


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pipeline]:
    with started(tmp_path_factory.mktemp("policy-deploy-home"), partitions=2) as running:
        yield running


def policy_set(directory: Path, extra: str | None = None) -> Path:
    """The shipped set in `directory`, with `extra.cedar` beside it when given."""
    directory.mkdir(parents=True, exist_ok=True)
    for source, text in [*policy_files(), budgets_file()]:
        (directory / Path(source).name).write_text(text)
    if extra is not None:
        (directory / "extra.cedar").write_text(extra)
    return directory


def deploy(stack: Pipeline, directory: Path, *options: str) -> str:
    """Deploy the set; its digest."""
    done = stack.cli("policy", "deploy", str(directory), *options)
    assert done.returncode == 0, done.stdout + done.stderr
    return str(done.stdout.split("policy set ", 1)[1].split()[0])


def decided_by(stack: Pipeline, observation: dict[str, Any]) -> tuple[str, str]:
    """(how the policy stage decided the dry run, the set its record names)."""
    call_id = observation["tool_identity"]["call_id"]
    if taxonomy(observation) == "SUCCESS":
        [policy] = [p for p in observation["result_payload"]["data"]["preconditions"] if p["stage"] == "policy"]
        named = [part.removeprefix("set:") for part in policy["detail"].split(";") if part.startswith("set:")]
        assert len(named) == 1, policy
        return "allowed", named[0]
    assert errors_of(observation) == [(None, "policy.fetch-paused")], observation
    rows = stack.sql(
        "SELECT detail->>'policy_set' FROM toolgate.audit_log WHERE call_id = %s AND stage = 'policy' "
        "AND action = 'refused'",
        (call_id,),
    )
    # A copy the client sent again (no answer within 10 s, e.g. while a worker restarts) is
    # decided and audited again: every copy must name the same set.
    named = {row[0] for row in rows}
    assert len(named) == 1 and rows[0][0], rows
    return "refused", str(rows[0][0])


class Traffic:
    """Dry runs of invoice.fetch, four at a time, from a thread, until stopped: (sent at, outcome)."""

    def __init__(self, stack: Pipeline) -> None:
        self.stack, self.done = stack, threading.Event()
        self.seen: list[tuple[float, dict[str, Any]]] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.done.is_set():
            at = time.monotonic()
            sent = [self.stack.propose("invoice.fetch", FETCH, dry_run=True) for _ in range(4)]
            self.seen += [(at, self.stack.wait(s)) for s in sent]

    def until(self, count: int) -> None:
        eventually(lambda: len(self.seen) >= count, timeout=90)

    def stop(self) -> list[tuple[float, dict[str, Any]]]:
        self.done.set()
        self.thread.join(90)
        return self.seen


def test_a_stricter_set_deployed_mid_traffic_decides_every_call_after_it(stack: Pipeline, tmp_path: Path) -> None:
    before = deploy(stack, policy_set(tmp_path / "shipped"))
    traffic = Traffic(stack)
    traffic.until(8)
    after = deploy(stack, policy_set(tmp_path / "strict", PAUSE_FETCH))
    deployed_at = time.monotonic()
    traffic.until(len(traffic.seen) + 12)
    seen = traffic.stop()
    decided = [(at, *decided_by(stack, observation)) for at, observation in seen]
    assert {(how, digest) for _, how, digest in decided} == {("allowed", before), ("refused", after)}
    # Never the old set once the new one decides: a round that starts after the deployment committed
    # takes it (workers/policy/live.py), and every call of a later batch was sent after one the new
    # set answered. Within one batch of four sent together, the calls may be decided in different
    # rounds, in any order, so the list's order among them says nothing.
    switch = min(at for at, _, digest in decided if digest == after)
    assert all(digest == after for at, _, digest in decided if at > switch), decided
    assert all(digest == after for at, _, digest in decided if at > deployed_at)
    audited = stack.sql(
        "SELECT detail->>'digest', detail->>'previous', detail->>'role' FROM toolgate.audit_log "
        "WHERE action = 'policy_deployed' ORDER BY id DESC LIMIT 1"
    )
    assert audited == [(after, before, "enforcing")]
    shown = stack.cli("policy", "deployed", "--json")
    assert json.loads(shown.stdout)["enforcing"] == after, shown.stdout + shown.stderr
    verified = stack.cli("audit", "verify", "--json")  # the deploys' entries are in the chain, checkpointed
    assert json.loads(verified.stdout)["verdict"] == "intact", verified.stdout + verified.stderr


def test_a_set_that_cannot_be_admitted_is_refused_at_deploy_and_the_workers_keep_theirs(
    stack: Pipeline, tmp_path: Path
) -> None:
    held = deploy(stack, policy_set(tmp_path / "shipped"))
    rows = stack.sql("SELECT count(*) FROM toolgate.policy_deployments")
    bad = tmp_path / "bad"
    policy_set(bad, BAD)
    done = stack.cli("policy", "deploy", str(bad))
    said = done.stdout + done.stderr
    assert done.returncode == 1, said
    assert "not deployed" in said and "wrong-argument" in said and "no-count" in said, said
    assert stack.sql("SELECT count(*) FROM toolgate.policy_deployments") == rows  # stored nowhere
    assert decided_by(stack, stack.call("invoice.fetch", FETCH, dry_run=True)) == ("allowed", held)


def test_a_row_written_into_the_table_is_not_taken_without_the_deployments_signature(
    stack: Pipeline, tmp_path: Path
) -> None:
    strict = deploy(stack, policy_set(tmp_path / "strict", PAUSE_FETCH))
    assert decided_by(stack, stack.call("invoice.fetch", FETCH, dry_run=True)) == ("refused", strict)
    [(genuine_id, key_id, signature)] = stack.sql(
        "SELECT id, key_id, signature FROM toolgate.policy_deployments WHERE digest = %s ORDER BY id DESC LIMIT 1",
        (strict,),
    )
    shipped = policy_set(tmp_path / "shipped")
    files = {p.name: p.read_text() for p in shipped.iterdir()}
    digest = stack.cli("policy", "check", str(shipped)).stdout.rsplit("policy set ", 1)[1].split()[0]
    forged = [(key_id, b"\x01" * 64), (key_id, bytes(signature))]  # a made-up signature; a genuine one of another row
    for signed_by, made in forged:
        stack.sql(
            "INSERT INTO toolgate.policy_deployments (role, digest, files, deployed_by, key_id, signature) "
            "VALUES ('enforcing', %s, %s, 'operator', %s, %s)",
            (digest, json.dumps(files), signed_by, made),
        )
        for _ in range(3):  # rounds after the row: the strict set still decides
            assert decided_by(stack, stack.call("invoice.fetch", FETCH, dry_run=True)) == ("refused", strict)
    log = (stack.home / "logs" / "policy.log").read_text()
    assert log.count("not taken") >= 2 and "signature is not the deployment's" in log, log[-2000:]
    assert genuine_id


def test_the_workers_role_reads_the_deployed_sets_and_may_not_write_them(stack: Pipeline, tmp_path: Path) -> None:
    deploy(stack, policy_set(tmp_path / "shipped"))
    with psycopg.connect(worker_database_url(stack, "policy"), autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM toolgate.policy_deployments").fetchone() > (0,)
        for statement in (
            "INSERT INTO toolgate.policy_deployments (role, digest, files, deployed_by, key_id, signature) "
            "VALUES ('enforcing', 'd', '{}', 'w', 'k', '\\x00')",
            "UPDATE toolgate.policy_deployments SET deployed_by = 'mallory'",
            "DELETE FROM toolgate.policy_deployments",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction(force_rollback=True):
                conn.execute(statement)


def test_a_policy_worker_that_starts_takes_the_deployed_set_not_its_directorys(stack: Pipeline, tmp_path: Path) -> None:
    strict = deploy(stack, policy_set(tmp_path / "strict", PAUSE_FETCH))
    pid = stack.worker_pid("policy")
    os.kill(pid, signal.SIGKILL)  # `toolgate up` starts it again, with the shipped set as its directory's
    eventually(lambda: stack.worker_pid("policy") != pid, timeout=90)
    assert decided_by(stack, stack.call("invoice.fetch", FETCH, dry_run=True)) == ("refused", strict)


def test_a_deployed_rule_on_the_calls_resource_judges_the_row_the_round_read(stack: Pipeline, tmp_path: Path) -> None:
    deploy(stack, policy_set(tmp_path / "resources", NOT_ABOVE))
    invoice = stack.open_invoice(amount_cents=125_000)
    above = stack.call(
        "payment.charge_card", {"invoice_id": invoice, "amount_cents": 150_000, "currency": "USD"}, dry_run=True
    )
    assert (taxonomy(above), errors_of(above)) == ("POLICY_VIOLATION", [(None, "policy.not-above-the-invoice")])
    exact = stack.call(
        "payment.charge_card", {"invoice_id": invoice, "amount_cents": 125_000, "currency": "USD"}, dry_run=True
    )
    assert taxonomy(exact) == "SUCCESS", exact


def _shadow_count(stack: Pipeline) -> float:
    port = int(stack.refresh_runtime()["metrics"]["policy"])
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("toolgate_policy_shadow_disagreements_total{") and 'tool="invoice.fetch"' in line
    )


def test_a_shadow_set_changes_nothing_and_its_disagreements_are_counted_and_listed(
    stack: Pipeline, tmp_path: Path
) -> None:
    enforcing = deploy(stack, policy_set(tmp_path / "shipped"))
    shadow = deploy(stack, policy_set(tmp_path / "strict", PAUSE_FETCH), "--shadow")
    counted = _shadow_count(stack)
    sent = [stack.propose("invoice.fetch", FETCH, dry_run=True) for _ in range(6)]
    observations = [stack.wait(s) for s in sent]
    assert {decided_by(stack, o) for o in observations} == {("allowed", enforcing)}  # the shadow changed nothing
    ids = sorted(s.call_id for s in sent)
    recorded = stack.sql(
        "SELECT call_id, enforcing_class, shadow_class, shadow_code, enforcing_digest, shadow_digest "
        "FROM toolgate.policy_shadow_disagreements WHERE call_id = ANY(%s) ORDER BY call_id",
        (ids,),
    )
    assert recorded == [(i, "ALLOW", "POLICY_VIOLATION", "policy.fetch-paused", enforcing, shadow) for i in ids]
    eventually(lambda: _shadow_count(stack) >= counted + 6, timeout=30)
    report = stack.cli("policy", "shadow", "report", "--since", "1h", "--json")
    [row] = [r for r in json.loads(report.stdout) if r["tool"] == "invoice.fetch" and r["shadow_set"] == shadow]
    assert row["enforcing"] == "ALLOW" and row["shadow"] == "POLICY_VIOLATION policy.fetch-paused", row
    assert row["count"] >= 6 and set(row["examples"]) <= set(ids), row  # the newest, and only this test shadows
    said = stack.cli("policy", "shadow", "report", "--since", "1h")
    assert f"(set {shadow}); e.g." in said.stdout, said.stdout  # the set's whole digest, as deploy printed it
    stopped = stack.cli("policy", "shadow", "stop")
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    after = stack.call("invoice.fetch", FETCH, dry_run=True)
    assert stack.sql(
        "SELECT count(*) FROM toolgate.policy_shadow_disagreements WHERE call_id = %s",
        (after["tool_identity"]["call_id"],),
    ) == [(0,)]
