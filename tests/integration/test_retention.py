"""Retention on the session's Postgres, run by the reconciliation worker itself (every 2 s in
the test session): history past its age goes, in every table that grows with each call; what a
reader still needs stays; the audit log only grows, and says what was pruned."""

from __future__ import annotations

import json
import uuid
from typing import Any

import psycopg

from ..conftest import Pipeline, eventually

OLD = "now() - interval '40 days'"


def _seed(pipeline: Pipeline, tag: str) -> dict[str, tuple[str, str]]:
    """Rows past retention ('gone') and rows it must keep ('kept'); returns (table, where) for each.

    Written in one transaction: the worker prunes every 2 s, and a pass that saw the held call
    before its approval, or an approval before its decisions, would judge a state that never
    exists in a real database."""
    statements: list[tuple[str, Any]] = []
    sql = lambda query, params=None: statements.append((query, params))  # noqa: E731
    n = lambda name: f"{name}_{tag}"  # noqa: E731
    rows: dict[str, tuple[str, str]] = {}

    for name, at in (("old", OLD), ("fresh", "now()")):
        sql(
            "INSERT INTO toolgate.calls (tenant_id, call_id, proposal_digest, agent_id, at) "
            f"VALUES ('acme', %s, 'd', 'cli', {at})",
            (n(f"call_{name}"),),
        )
        sql(
            "INSERT INTO toolgate.repair_attempts (tenant_id, run_id, logical_operation_id, call_id, "
            f"payload_fingerprint, error_fingerprint, at) VALUES ('acme', 'r', 'op', %s, 'p', 'e', {at})",
            (n(f"repair_{name}"),),
        )
        sql(
            "INSERT INTO toolgate.usage_events (event_id, spends, tenant_id, run_id, tool_name, at) "
            f"VALUES (%s, '{{write}}', 'acme', 'r', 'invoice.create_draft', {at})",
            (n(f"usage_{name}"),),
        )
        sql(
            "INSERT INTO toolgate.usage_values (event_id, dimension, tenant_id, agent_id, run_id, day, amount, at) "
            f"VALUES (%s, 'money:USD', 'acme', 'cli', 'r', (({at}) AT TIME ZONE 'UTC')::date, 5, {at})",
            (n(f"usage_{name}"),),
        )
    rows["call old"] = ("gone", f"toolgate.calls WHERE call_id = '{n('call_old')}'")
    rows["call fresh"] = ("kept", f"toolgate.calls WHERE call_id = '{n('call_fresh')}'")
    rows["repair old"] = ("gone", f"toolgate.repair_attempts WHERE call_id = '{n('repair_old')}'")
    rows["repair fresh"] = ("kept", f"toolgate.repair_attempts WHERE call_id = '{n('repair_fresh')}'")
    rows["usage old"] = ("gone", f"toolgate.usage_events WHERE event_id = '{n('usage_old')}'")
    rows["usage fresh"] = ("kept", f"toolgate.usage_events WHERE event_id = '{n('usage_fresh')}'")
    for name, at in (("old", OLD), ("fresh", "now()")):  # a shadow policy set's disagreements (0028)
        sql(
            "INSERT INTO toolgate.policy_shadow_disagreements (at, tenant_id, call_id, tool_name, tool_version, "
            "enforcing_digest, shadow_digest, enforcing_class, enforcing_code, enforcing_approvals, shadow_class, "
            f"shadow_code, shadow_approvals) VALUES ({at}, 'acme', %s, 'invoice.fetch', '1.0.0', 'e', 's', 'ALLOW', "
            "'', 0, 'POLICY_VIOLATION', 'policy.x', 0)",
            (n(f"shadow_{name}"),),
        )
    rows["shadow disagreement old"] = (
        "gone",
        f"toolgate.policy_shadow_disagreements WHERE call_id = '{n('shadow_old')}'",
    )
    rows["shadow disagreement fresh"] = (
        "kept",
        f"toolgate.policy_shadow_disagreements WHERE call_id = '{n('shadow_fresh')}'",
    )
    rows["value reserved long ago"] = ("gone", f"toolgate.usage_values WHERE event_id = '{n('usage_old')}'")
    rows["value reserved now"] = ("kept", f"toolgate.usage_values WHERE event_id = '{n('usage_fresh')}'")

    # A call whose approval is kept (still PENDING) is kept with it, however old.
    sql(
        "INSERT INTO toolgate.calls (tenant_id, call_id, proposal_digest, agent_id, at) "
        f"VALUES ('acme', %s, 'd', 'cli', {OLD})",
        (n("call_held"),),
    )
    for name, status, decided in (
        ("decided", "APPROVED", OLD),
        ("pending", "PENDING", "NULL"),
        ("recent", "DENIED", "now()"),
    ):
        call = n("call_held") if name == "pending" else n(f"call_{name}")
        sql(
            "INSERT INTO toolgate.approvals (approval_id, call_id, tenant_id, run_id, tool_name, tool_version, "
            "payload_hash, risk_class, required_approvals, status, home_partition, request, packet, created_at, "
            "expires_at, decided_at) VALUES (%s, %s, 'acme', 'r', 'invoice.create_draft', '1.0.0', 'h', "
            f"'MEDIUM_RISK_WRITE', 1, %s, 0, '', '{{}}', {OLD}, now() + interval '1 hour', {decided})",
            (n(f"apr_{name}"), call, status),
        )
        sql(
            "INSERT INTO toolgate.approval_decisions (decision_id, approval_id, approver_id, verdict, decided_at) "
            "VALUES (%s, %s, 'carol', 'APPROVE', now())",
            (n(f"dec_{name}"), n(f"apr_{name}")),
        )
    rows["approval decided long ago"] = ("gone", f"toolgate.approvals WHERE approval_id = '{n('apr_decided')}'")
    rows["its decisions"] = ("gone", f"toolgate.approval_decisions WHERE approval_id = '{n('apr_decided')}'")
    rows["approval pending"] = ("kept", f"toolgate.approvals WHERE approval_id = '{n('apr_pending')}'")
    rows["approval decided today"] = ("kept", f"toolgate.approvals WHERE approval_id = '{n('apr_recent')}'")
    rows["call of a pending approval"] = ("kept", f"toolgate.calls WHERE call_id = '{n('call_held')}'")

    tenant = f"t{tag}"  # the daily counters and dead-letter actions of a tenant of this test alone
    for days in (40, 1):
        sql(
            "INSERT INTO toolgate.usage_daily (tenant_id, dimension, day, used) "
            "VALUES (%s, 'write', (now() AT TIME ZONE 'UTC')::date - %s, 3)",
            (tenant, days),
        )
        sql(
            "INSERT INTO toolgate.usage_value_daily (tenant_id, dimension, day, used) "
            "VALUES (%s, 'money:USD', (now() AT TIME ZONE 'UTC')::date - %s, 3)",
            (tenant, days),
        )
        sql(
            "INSERT INTO toolgate.dead_letter_actions (dead_letter_id, action, actor, at) "
            f"VALUES (%s, 'discarded', 'op', now() - interval '{days * 20} days')",
            (n(f"dl_{days}"),),
        )
    rows["daily counter 40 days ago"] = (
        "gone",
        f"toolgate.usage_daily WHERE tenant_id = '{tenant}' AND used = 3 AND day < now() - interval '2 days'",
    )
    rows["yesterday's daily counter"] = (
        "kept",
        f"toolgate.usage_daily WHERE tenant_id = '{tenant}' AND day > now() - interval '3 days'",
    )
    rows["daily value counter 40 days ago"] = (
        "gone",
        f"toolgate.usage_value_daily WHERE tenant_id = '{tenant}' AND day < now() - interval '2 days'",
    )
    rows["yesterday's daily value counter"] = (
        "kept",
        f"toolgate.usage_value_daily WHERE tenant_id = '{tenant}' AND day > now() - interval '3 days'",
    )
    rows["dead-letter action 800 days ago"] = (
        "gone",
        f"toolgate.dead_letter_actions WHERE dead_letter_id = '{n('dl_40')}'",
    )
    rows["dead-letter action of a letter still on the topic"] = (
        "kept",
        f"toolgate.dead_letter_actions WHERE dead_letter_id = '{n('dl_1')}'",
    )

    # Expired keys go after retention, unless they are tombstones: the key of an operation that
    # ended (it never runs again), stripped of its request and outcome, and every key of a
    # contract that refuses an expired key (charge_card: expired_key reject); no other status
    # is ever pruned.
    for name, tool, status, expired_from, lease in (
        ("expired", "invoice.create_draft", "EXPIRED", None, "NULL"),
        ("never_ended", "invoice.create_draft", "EXPIRED", "FAILED_RETRYABLE", "NULL"),
        ("ended", "invoice.create_draft", "EXPIRED", "COMPLETED", "NULL"),
        ("refused", "payment.charge_card", "EXPIRED", None, "NULL"),
        ("pending", "invoice.create_draft", "PENDING", None, "now() + interval '1 hour'"),
    ):
        sql(
            "INSERT INTO toolgate.idempotency_keys (tenant_id, idempotency_key, request_hash, status, expired_from, "
            "tool_name, tool_version, executor, call_id, home_partition, request, response, lease_owner, lease_until, "
            f"expires_at) VALUES ('acme', %s, 'h', %s, %s, %s, '1.0.0', 'postgres', 'c', 0, 'the request', "
            f"""'{{"data": 1}}', 'elsewhere', {lease}, {OLD})""",
            (n(f"key_{name}"), status, expired_from, tool),
        )
    rows["expired key"] = ("gone", f"toolgate.idempotency_keys WHERE idempotency_key = '{n('key_expired')}'")
    rows["expired key of an operation that never ended"] = (
        "gone",
        f"toolgate.idempotency_keys WHERE idempotency_key = '{n('key_never_ended')}'",
    )
    rows["tombstone of an operation that ended"] = (
        "kept",
        f"toolgate.idempotency_keys WHERE idempotency_key = '{n('key_ended')}'",
    )
    rows["its request and outcome"] = (
        "gone",
        f"toolgate.idempotency_keys WHERE idempotency_key = '{n('key_ended')}' "
        "AND (response IS NOT NULL OR octet_length(request) > 0)",
    )
    rows["expired key its contract refuses"] = (
        "kept",
        f"toolgate.idempotency_keys WHERE idempotency_key = '{n('key_refused')}'",
    )
    rows["pending key"] = ("kept", f"toolgate.idempotency_keys WHERE idempotency_key = '{n('key_pending')}'")

    # A read's first outcome is kept for the proposal window only (a copy past it is stale).
    for name, at in (("old", "now() - interval '20 minutes'"), ("fresh", "now()")):
        sql(
            "INSERT INTO toolgate.read_outcomes (tenant_id, call_id, request_hash, response, at) "
            f"VALUES ('acme', %s, 'h', '{{}}', {at})",
            (n(f"read_{name}"),),
        )
    rows["read outcome past the proposal window"] = (
        "gone",
        f"toolgate.read_outcomes WHERE call_id = '{n('read_old')}'",
    )
    rows["read outcome within it"] = ("kept", f"toolgate.read_outcomes WHERE call_id = '{n('read_fresh')}'")

    # A decision's record (issue 51, part 3) is history like the call it decided, and so is an
    # observation as published (migration 0036) of the call it answered.
    for name, at in (("old", OLD), ("fresh", "now()")):
        sql(
            "INSERT INTO toolgate.call_decisions (tenant_id, call_id, stage, decided_at_ms, tool_name, tool_version, "
            f"outcome, at) VALUES ('acme', %s, 'policy', 0, 'invoice.fetch', '1.0.0', 'allow', {at})",
            (n(f"decided_{name}"),),
        )
        sql(
            "INSERT INTO toolgate.observations (tenant_id, call_id, topic, value, headers, at) "
            f"VALUES ('acme', %s, 'tool.observations.acme', 'v', '[]', {at})",
            (n(f"observed_{name}"),),
        )
    for label, table, call in (
        ("decision record", "call_decisions", "decided"),
        ("observation", "observations", "observed"),
    ):
        rows[f"{label} past history"] = ("gone", f"toolgate.{table} WHERE call_id = '{n(call + '_old')}'")
        rows[f"{label} within it"] = ("kept", f"toolgate.{table} WHERE call_id = '{n(call + '_fresh')}'")

    with psycopg.connect(pipeline.database_url) as conn, conn.transaction():
        for query, params in statements:
            conn.execute(query, params)
    return rows


def _count(pipeline: Pipeline, where: str) -> int:
    return int(pipeline.sql(f"SELECT count(*) FROM {where}")[0][0])


def test_the_reconciliation_worker_prunes_history_past_retention_and_nothing_else(pipeline: Pipeline) -> None:
    tag = uuid.uuid4().hex[:10]
    audit_rows = _count(pipeline, "toolgate.audit_log")
    rows = _seed(pipeline, tag)

    gone = {label: where for label, (fate, where) in rows.items() if fate == "gone"}
    eventually(lambda: all(_count(pipeline, where) == 0 for where in gone.values()), timeout=30)

    kept = {label: _count(pipeline, where) for label, (fate, where) in rows.items() if fate == "kept"}
    assert all(kept.values()), f"pruned what it must keep: {[k for k, v in kept.items() if not v]}"
    assert _count(pipeline, "toolgate.audit_log") > audit_rows
    [(detail,)] = pipeline.sql(
        "SELECT detail FROM toolgate.audit_log WHERE action = 'pruned' AND stage = 'reconciliation' "
        "AND (detail->'deleted'->>'calls')::int > 0 ORDER BY id DESC LIMIT 1"
    )
    assert detail["older_than_s"]["calls"] == 30 * 86_400
    verified = pipeline.cli("audit", "verify", "--json")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert json.loads(verified.stdout)["verdict"] == "intact"


def test_toolgate_prune_runs_one_pass_by_hand(pipeline: Pipeline) -> None:
    done = pipeline.cli("prune")
    assert done.returncode == 0, done.stderr
    assert set(json.loads(done.stdout)) == {
        "repair_attempts",
        "usage_events",
        "usage_daily",
        "usage_values",
        "usage_value_daily",
        "approvals",
        "calls",
        "read_outcomes",
        "policy_shadow_disagreements",
        "call_decisions",
        "observations",
        "dead_letter_actions",
        "idempotency_key_outcomes",
        "idempotency_keys",
    }


def test_a_compensated_key_expires_after_its_window_like_every_settled_key(pipeline: Pipeline) -> None:
    key = f"key_compensated_{uuid.uuid4().hex[:10]}"
    pipeline.sql(
        "INSERT INTO toolgate.idempotency_keys (tenant_id, idempotency_key, request_hash, status, tool_name, "
        "tool_version, executor, call_id, home_partition, request, expires_at) VALUES ('acme', %s, 'h', "
        "'COMPENSATED', 'invoice.create_draft', '1.0.0', 'postgres', 'c', 0, '', now() - interval '1 second')",
        (key,),
    )
    query = "SELECT status FROM toolgate.idempotency_keys WHERE idempotency_key = %s"
    eventually(lambda: pipeline.sql(query, (key,)) == [("EXPIRED",)])
