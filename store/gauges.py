"""The deployment's gauges' reads of Postgres (ops/gauges.py samples them in the reconciliation
worker): approvals waiting, by tool and approver group; approvals decided since the last sample,
with how long each took; budgets spent today; the audit chain's length."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import psycopg

from toolgate.store.db import one_row

APPROVALS_PENDING = """
SELECT tool_name, coalesce(g, ''), count(*) FROM toolgate.approvals
LEFT JOIN LATERAL unnest(CASE WHEN approver_groups = '{}' THEN ARRAY[NULL] ELSE approver_groups END) AS g ON true
WHERE status = 'PENDING' GROUP BY 1, 2
"""
APPROVALS_DECIDED = """
SELECT tool_name, status, extract(epoch FROM decided_at - created_at) * 1000, decided_at FROM toolgate.approvals
WHERE status <> 'PENDING' AND decided_at > %s ORDER BY decided_at
"""
BUDGET_TODAY = """
SELECT tenant_id, dimension, used FROM toolgate.usage_daily WHERE day = (now() AT TIME ZONE 'UTC')::date
"""
AUDIT_HEAD = "SELECT coalesce(max(row_count), 0) FROM toolgate.audit_heads"
NOW = "SELECT now()"


@dataclass(frozen=True, slots=True)
class Waiting:
    """How many approvals of a tool wait on a group ('' for none named)."""

    tool_name: str
    group: str
    count: int


@dataclass(frozen=True, slots=True)
class Decided:
    """An approval decided: its tool, how it ended, how long it took and when."""

    tool_name: str
    status: str
    took_ms: float
    decided_at: dt.datetime


@dataclass(frozen=True, slots=True)
class Spent:
    """A tenant's budget dimension spent today."""

    tenant_id: str
    dimension: str
    used: int


def waiting(conn: psycopg.Connection[Any]) -> list[Waiting]:
    return [Waiting(*row) for row in conn.execute(APPROVALS_PENDING).fetchall()]


def decided_since(conn: psycopg.Connection[Any], since: dt.datetime) -> list[Decided]:
    """The approvals decided after `since`, oldest first."""
    rows = conn.execute(APPROVALS_DECIDED, (since,)).fetchall()
    return [Decided(tool, status, float(ms), at) for tool, status, ms, at in rows]


def now(conn: psycopg.Connection[Any]) -> dt.datetime:
    at: dt.datetime = one_row(conn, NOW)[0]
    return at


def spent_today(conn: psycopg.Connection[Any]) -> list[Spent]:
    return [Spent(*row) for row in conn.execute(BUDGET_TODAY).fetchall()]


def audit_head(conn: psycopg.Connection[Any]) -> int:
    """How many rows the audit chain holds."""
    row = conn.execute(AUDIT_HEAD).fetchone()
    return int(row[0]) if row else 0
