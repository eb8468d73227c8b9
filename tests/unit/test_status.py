"""The health judgement of `toolgate status` (ops/health.py): every row of its table, and the
lag arithmetic of ops/status.py."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from toolgate.ops.health import Finding, Limits, Severity, healthy, judge
from toolgate.ops.lag import partition_lag
from toolgate.ops.snapshot import Approvals, DeadLetters, Keys, Lag, Outbox, Process, Snapshot
from toolgate.workers.stages import STAGES

UNHEALTHY, WARNING = Severity.UNHEALTHY, Severity.WARNING
LIMITS = Limits()
POSTGRES_ONLY = ("outbox-relay", "reconciliation")


def stages(**changed: dict[str, Any]) -> tuple[Process, ...]:
    base = [Process(stage, 1000 + i, True, True) for i, stage in enumerate(STAGES)]
    return tuple(replace(p, **changed.get(p.name.replace("-", "_"), {})) for p in base)


def lags(**records: int) -> tuple[Lag, ...]:
    return tuple(
        Lag(stage, None)
        if stage in POSTGRES_ONLY
        else Lag(stage, f"toolgate-{stage}", (f"tool.{stage}",), records.get(stage, 0), True, 4, 4)
        for stage in STAGES
    )


def snapshot(**overrides: Any) -> Snapshot:
    """A healthy system: every process running and ready, nothing behind, nothing waiting."""
    base = Snapshot(
        home="/home/op/.toolgate",
        supervisor=Process("toolgate up", 900, True),
        processes=(*stages(), Process("provider", 990, True)),
        infrastructure=(Process("broker", 901, True), Process("postgres", 902, True)),
        lags=lags(),
        keys=Keys(0),
        approvals=Approvals(0),
        outbox=Outbox(0),
        dead_letters=DeadLetters(0),
    )
    return replace(base, **overrides)


@dataclass(frozen=True)
class Row:
    id: str
    snapshot: Snapshot
    expected: set[tuple[Severity, str]] = field(default_factory=set)
    limits: Limits = LIMITS


TABLE = [
    Row("all well", snapshot()),
    Row(
        "busy but within bounds",
        snapshot(
            lags=lags(validation=LIMITS.max_lag),
            keys=Keys(40, oldest_age_s=2.0, lease_expired=3, most_overdue_s=LIMITS.key_overdue_s),
            approvals=Approvals(5, oldest_age_s=600.0, past_expiry=1, most_overdue_s=LIMITS.approval_overdue_s),
            outbox=Outbox(300, oldest_age_s=LIMITS.max_outbox_age_s),
        ),
    ),
    Row("no runtime file", snapshot(supervisor=None, processes=(), infrastructure=()), {(WARNING, "toolgate up")}),
    Row(
        "toolgate up gone, the runtime file stale",
        snapshot(supervisor=Process("toolgate up", 900, False)),
        {(UNHEALTHY, "toolgate up")},
    ),
    Row(
        "a stage's process is gone",
        snapshot(processes=stages(execution={"alive": False})),
        {(UNHEALTHY, "execution")},
    ),
    Row(
        "a stage has no process in the runtime file",
        snapshot(processes=stages(normalization={"pid": None, "alive": False, "ready": False})),
        {(UNHEALTHY, "normalization")},
    ),
    Row(
        "a stage runs but is not ready yet",
        snapshot(processes=stages(policy={"ready": False})),
        {(WARNING, "policy")},
    ),
    Row(
        "a stage was restarted and runs again",
        snapshot(processes=stages(approval_wait={"restarts": 2})),
        {(WARNING, "approval-wait")},
    ),
    Row(
        "a restarted stage is down again",
        snapshot(processes=stages(outbox_relay={"restarts": 5, "alive": False})),
        {(UNHEALTHY, "outbox-relay"), (WARNING, "outbox-relay")},
    ),
    Row(
        "the demo provider is gone",
        snapshot(processes=(*stages(), Process("provider", 990, False))),
        {(UNHEALTHY, "provider")},
    ),
    Row(
        "the embedded broker is gone",
        snapshot(infrastructure=(Process("broker", 901, False), Process("postgres", 902, True))),
        {(UNHEALTHY, "broker")},
    ),
    Row(
        "postgres restarted",
        snapshot(infrastructure=(Process("postgres", 903, True, restarts=1),)),
        {(WARNING, "postgres")},
    ),
    Row("a stage far behind", snapshot(lags=lags(policy=LIMITS.max_lag + 1)), {(UNHEALTHY, "policy")}),
    Row(
        "a lag that is only a lower bound still counts",
        snapshot(
            lags=tuple(replace(lag, records=50_000, exact=False) if lag.stage == "execution" else lag for lag in lags())
        ),
        {(UNHEALTHY, "execution")},
    ),
    Row(
        "a bound of the operator's",
        snapshot(lags=lags(validation=500)),
        {(UNHEALTHY, "validation")},
        replace(LIMITS, max_lag=100),
    ),
    Row(
        "keys PENDING past their lease, unresolved",
        snapshot(keys=Keys(2, oldest_age_s=95.0, lease_expired=2, most_overdue_s=LIMITS.key_overdue_s + 1)),
        {(UNHEALTHY, "idempotency keys")},
    ),
    Row("an old key within its lease", snapshot(keys=Keys(1, oldest_age_s=3600.0))),
    Row(
        "approvals past their expiry, never auto-denied",
        snapshot(
            approvals=Approvals(1, oldest_age_s=900.0, past_expiry=1, most_overdue_s=LIMITS.approval_overdue_s + 1)
        ),
        {(UNHEALTHY, "approvals")},
    ),
    Row("an approval waiting a long time, not expired", snapshot(approvals=Approvals(1, oldest_age_s=86_400.0))),
    Row(
        "an old unsent outbox row",
        snapshot(outbox=Outbox(1, oldest_age_s=LIMITS.max_outbox_age_s + 1, retrying=1)),
        {(UNHEALTHY, "outbox")},
    ),
    Row("open dead letters", snapshot(dead_letters=DeadLetters(3)), {(WARNING, "dead letters")}),
    Row("forged dead letters", snapshot(dead_letters=DeadLetters(0, forged=1)), {(WARNING, "dead letters")}),
    Row(
        "the broker cannot be read",
        snapshot(lags=(), dead_letters=None, errors={"consumer lag": "timed out", "dead letters": "timed out"}),
        {(UNHEALTHY, "consumer lag"), (UNHEALTHY, "dead letters")},
    ),
    Row(
        "postgres cannot be read",
        snapshot(keys=None, approvals=None, outbox=None, errors={"postgres": "connection refused"}),
        {(UNHEALTHY, "postgres")},
    ),
]


@pytest.mark.parametrize("row", TABLE, ids=[r.id for r in TABLE])
def test_every_row_of_the_health_table(row: Row) -> None:
    findings = judge(row.snapshot, row.limits)
    assert {(f.severity, f.subject) for f in findings} == row.expected
    assert healthy(findings) == (UNHEALTHY not in {s for s, _ in row.expected})
    assert all(f.reason for f in findings)


def test_unhealthy_findings_come_first_and_say_why() -> None:
    sick = snapshot(
        dead_letters=DeadLetters(2),
        processes=stages(execution={"alive": False}, policy={"restarts": 1}),
        outbox=Outbox(7, oldest_age_s=45.0),
    )
    findings = judge(sick, LIMITS)
    assert [f.severity for f in findings] == [UNHEALTHY, UNHEALTHY, WARNING, WARNING]
    assert Finding(UNHEALTHY, "execution", "pid 1003 is not running") in findings
    outbox = next(f for f in findings if f.subject == "outbox")
    assert "7 rows unsent" in outbox.reason and "45 s old" in outbox.reason and "bound 30 s" in outbox.reason


def test_stages_that_read_postgres_have_no_lag_to_judge() -> None:
    quiet = tuple(Lag(stage, None) for stage in STAGES)
    assert judge(snapshot(lags=quiet), LIMITS) == ()


@pytest.mark.parametrize(
    ("reconcile_s", "sweep_s", "key_overdue_s", "approval_overdue_s"),
    [
        (5.0, 1.0, 30.0, 30.0),  # the defaults: never tighter than 30 s
        (1.0, 0.5, 30.0, 30.0),  # the test session's short intervals
        (20.0, 1.0, 60.0, 60.0),  # three reconciliation passes
        (5.0, 15.0, 30.0, 45.0),  # an approval waits for the slower of sweep and reconciliation
    ],
)
def test_overdue_limits_follow_the_intervals_that_resolve_them(
    reconcile_s: float, sweep_s: float, key_overdue_s: float, approval_overdue_s: float
) -> None:
    limits = Limits.for_intervals(reconcile_s, sweep_s)
    assert (limits.key_overdue_s, limits.approval_overdue_s) == (key_overdue_s, approval_overdue_s)


@pytest.mark.parametrize(
    ("committed", "low", "end", "lag"),
    [
        (10, 0, 10, 0),  # caught up
        (10, 0, 25, 15),  # behind
        (-1001, 0, 7, 7),  # the group never committed: it reads from the earliest record
        (-1001, 5, 7, 2),  # ... which retention may have moved
        (3, 5, 9, 4),  # committed below what retention kept: the deleted records are no lag
        (12, 0, 10, 0),  # an end read before the latest commit landed is never negative lag
        (-1001, 0, 0, 0),  # an empty partition
    ],
)
def test_partition_lag(committed: int, low: int, end: int, lag: int) -> None:
    assert partition_lag(committed, low, end) == lag
