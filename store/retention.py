"""Retention's statements: for each table, how its rows old enough are deleted, a batch at a
time, each in its own short transaction. The reconciliation worker's pruner
(workers/reconciliation/pruner.py) runs them with the ages retention.py derives, and `toolgate
prune` by hand. Parameters: %(age)s (seconds, or days for usage_daily), %(batch)s, %(refusing)s
(the tool versions whose expired keys are refused: kept as tombstones) and %(tombstone)s."""

from __future__ import annotations

from typing import Any

import psycopg

from toolgate.states import ENDED

BATCH = 5000  # rows a statement deletes at most, in one short transaction


def _older(column: str, age: str = "age") -> str:
    return f"{column} < now() - make_interval(secs => %({age})s)"


def _batch_of(table: str, where: str) -> str:
    return (
        f"DELETE FROM toolgate.{table} WHERE ctid = ANY(ARRAY("
        f"SELECT ctid FROM toolgate.{table} t WHERE {where} LIMIT %(batch)s FOR UPDATE SKIP LOCKED))"
    )


# A call's operational rows go only once its evidence bundle is kept (migration 0037; the pruner
# archives it first: workers/reconciliation/archive.py). An idempotency key whose call left no
# binding (pruned before 0037) has nothing left to archive.
_OF_CALL = "WHERE {0}.tenant_id = t.tenant_id AND {0}.call_id = t.call_id)"
_KEPT = "EXISTS (SELECT 1 FROM toolgate.evidence_bundles e " + _OF_CALL.format("e")
_KEY_KEPT = f"({_KEPT} OR NOT EXISTS (SELECT 1 FROM toolgate.calls c " + _OF_CALL.format("c") + ")"
# An observation of a call no archive will take (refused at validation's door: no binding and no
# decision of it; or pruned before 0037) goes with the history all the same.
_OBSERVED_KEPT = (
    f"({_KEPT} OR (NOT EXISTS (SELECT 1 FROM toolgate.calls c "
    + _OF_CALL.format("c")
    + " AND NOT EXISTS (SELECT 1 FROM toolgate.call_decisions d "
    + _OF_CALL.format("d")
    + "))"
)

# The statuses an operation ends in (toolgate.states.ENDED), as SQL.
_ENDED = "(" + ", ".join(f"'{status}'" for status in ENDED) + ")"

# Table, statement, and which of Ages it reads as %(age)s. Approvals before calls: a call is
# kept while an approval of it is (its approval_id is derived from the call_id).
STATEMENTS: tuple[tuple[str, str, str], ...] = (
    ("repair_attempts", _batch_of("repair_attempts", _older("t.at")), "repair_attempts"),
    ("usage_events", _batch_of("usage_events", _older("t.at")), "usage_events"),
    (
        "usage_daily",
        "DELETE FROM toolgate.usage_daily WHERE day < (now() AT TIME ZONE 'UTC')::date - %(age)s::int",
        "usage_daily_days",
    ),
    ("usage_values", _batch_of("usage_values", _older("t.at")), "usage_events"),
    (
        "usage_value_daily",
        "DELETE FROM toolgate.usage_value_daily WHERE day < (now() AT TIME ZONE 'UTC')::date - %(age)s::int",
        "usage_daily_days",
    ),
    (
        "approvals",
        """
        WITH old AS (
            SELECT approval_id FROM toolgate.approvals t
            WHERE status <> 'PENDING' AND decided_at < now() - make_interval(secs => %(age)s) AND """
        + _KEPT
        + """
            LIMIT %(batch)s FOR UPDATE SKIP LOCKED),
        decisions AS (
            DELETE FROM toolgate.approval_decisions WHERE approval_id IN (SELECT approval_id FROM old))
        DELETE FROM toolgate.approvals WHERE approval_id IN (SELECT approval_id FROM old)
        """,
        "approvals",
    ),
    (
        "calls",
        _batch_of(
            "calls",
            _older("t.at") + " AND NOT EXISTS (SELECT 1 FROM toolgate.approvals a "
            "WHERE a.tenant_id = t.tenant_id AND a.call_id = t.call_id) AND " + _KEPT,
        ),
        "calls",
    ),
    ("read_outcomes", _batch_of("read_outcomes", _older("t.at")), "read_outcomes"),
    # A shadow set's disagreements are kept as long as the calls they name (migration 0028).
    ("policy_shadow_disagreements", _batch_of("policy_shadow_disagreements", _older("t.at")), "calls"),
    ("call_decisions", _batch_of("call_decisions", _older("t.at") + " AND " + _KEPT), "call_decisions"),
    # Observations as published (migration 0036) are history like the decisions of their calls,
    # and go, like them, only once the call's evidence bundle is kept (if any archive will keep it).
    ("observations", _batch_of("observations", _older("t.at") + " AND " + _OBSERVED_KEPT), "call_decisions"),
    ("dead_letter_actions", _batch_of("dead_letter_actions", _older("t.at")), "dead_letter_actions"),
    (
        # An operation that ended keeps a tombstone (idempotency.plan): past history's age its
        # key is stripped of the request and the stored outcome, and kept for the tombstone window.
        "idempotency_key_outcomes",
        "UPDATE toolgate.idempotency_keys SET request = '', response = NULL WHERE ctid = ANY(ARRAY("
        "SELECT ctid FROM toolgate.idempotency_keys t WHERE t.status = 'EXPIRED' AND t.response IS NOT NULL AND "
        + _older("t.expires_at")
        + f" AND t.expired_from IN {_ENDED} AND {_KEY_KEPT} LIMIT %(batch)s FOR UPDATE SKIP LOCKED))",
        "expired_keys",
    ),
    (
        "idempotency_keys",
        _batch_of(
            "idempotency_keys",
            "t.status = 'EXPIRED' AND "
            + _older("t.expires_at")
            + f" AND t.expires_at < now() - make_interval(secs => CASE WHEN t.expired_from IN {_ENDED}"
            " OR t.tool_name || '@' || t.tool_version = ANY(%(refusing)b) THEN %(tombstone)s ELSE %(age)s END) AND "
            + _KEY_KEPT,
        ),
        "expired_keys",
    ),
)


async def delete_batch(conn: psycopg.AsyncConnection[Any], statement: str, params: dict[str, Any]) -> int:
    """Run one batch of `statement`; how many rows it deleted (or stripped)."""
    cur = await conn.execute(statement, params)
    return max(cur.rowcount, 0)
