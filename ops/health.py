"""What makes a running toolgate unhealthy: a pure judgement over what `toolgate status` read.

`judge(snapshot, limits)` turns the numbers ops/status.py gathered (processes, consumer lag,
Postgres backlogs, dead letters) into findings. It does no I/O and reads no clock: every age
in a snapshot was measured when it was gathered (by Postgres's own `now()`), so the same
snapshot always gets the same verdict, and the unit tests walk this table row by row.

| what was seen                                                       | severity  |
|---------------------------------------------------------------------|-----------|
| no runtime file: nothing here was started by `toolgate up`          | warning   |
| `toolgate up` itself is not running (its runtime file is stale)     | unhealthy |
| a stage (or the demo provider) has no process, or it is not running | unhealthy |
| a process was restarted by `toolgate up` (it says how many times)   | warning   |
| a stage's process runs but has not said it is ready                 | warning   |
| the embedded broker or Postgres is not running                      | unhealthy |
| a broker node runs but the cluster's metadata does not list it      | unhealthy |
| a stage's consumer lag is above `max_lag` (10,000 records)          | unhealthy |
| a key PENDING whose lease ran out more than `key_overdue_s` ago     | unhealthy |
| an approval PENDING more than `approval_overdue_s` past its expiry  | unhealthy |
| the oldest unsent outbox row is older than `max_outbox_age_s` (30)  | unhealthy |
| open dead letters (they wait for an operator), forged dead letters  | warning   |
| a source could not be read (broker, Postgres, the dead letters)     | unhealthy |

Why these bounds:
* A key whose lease ran out is reconciliation's to resolve on its next pass; one still PENDING
  `key_overdue_s` (3 reconciliation intervals, at least 30 s) later means reconciliation is not
  running, or cannot tell what happened (a provider that does not answer its status query keeps
  a key PENDING until the verification window closes): either way an agent is waiting.
* An approval past its expiry is approval-wait's sweep's (and reconciliation's) to AUTO_DENY;
  `approval_overdue_s` is 3 of the slower of those intervals, at least 30 s.
* An unsent outbox row is normally published within milliseconds (the relay is woken by
  NOTIFY); 30 s means the relay is down or the broker refuses it (a row retried with backoff
  counts too: it has not reached the agent).
* Lag is counted in Kafka records: one proposal per record on tool.proposals, one StageBatch
  (up to `batch_max` calls) per record on the internal topics. 10,000 records behind is many
  seconds of work at the rates measured here (NOTES.md), not a passing burst.
* A restart is worth knowing, not an outage in itself: `toolgate up` restarted the process
  with backoff, and the count (`restarts` in the runtime file) is the total since it started.
  A process in a crash loop is mostly not running while it backs off, and that is unhealthy.
* A broker node the cluster's metadata does not list is fenced (it lost its controller) or
  still starting: it serves no partition. Three Kafka nodes keep serving without one, but
  a write then has fewer copies to wait for, and one more loss stops writes.
* Dead letters are calls an operator must look at (`toolgate dlq list`), not a system that
  is failing: they are warned about, and the exit status stays 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from toolgate.ops.snapshot import BrokerCluster, DeadLetters, Lag, Snapshot

MAX_LAG_RECORDS = 10_000
MAX_OUTBOX_AGE_S = 30.0
MIN_OVERDUE_S = 30.0
OVERDUE_INTERVALS = 3


class Severity(StrEnum):
    UNHEALTHY = "unhealthy"  # `toolgate status` exits 1
    WARNING = "warning"  # said, and the exit status stays 0


@dataclass(frozen=True)
class Limits:
    max_lag: int = MAX_LAG_RECORDS
    max_outbox_age_s: float = MAX_OUTBOX_AGE_S
    key_overdue_s: float = MIN_OVERDUE_S
    approval_overdue_s: float = MIN_OVERDUE_S

    @classmethod
    def for_intervals(cls, reconcile_s: float, approval_sweep_s: float) -> Limits:
        """The limits for a deployment whose reconciliation and approval sweep run this often."""
        return cls(
            key_overdue_s=max(MIN_OVERDUE_S, OVERDUE_INTERVALS * reconcile_s),
            approval_overdue_s=max(MIN_OVERDUE_S, OVERDUE_INTERVALS * max(reconcile_s, approval_sweep_s)),
        )


@dataclass(frozen=True)
class Finding:
    severity: Severity
    subject: str
    reason: str


def judge(snapshot: Snapshot, limits: Limits) -> tuple[Finding, ...]:
    """Every finding about a snapshot, unhealthy ones first; none means healthy."""
    found = [
        *_processes(snapshot),
        *_broker_nodes(snapshot.broker),
        *_lags(snapshot.lags, limits),
        *_postgres(snapshot, limits),
        *_dead_letters(snapshot.dead_letters),
        *(Finding(Severity.UNHEALTHY, what, f"cannot read it: {why}") for what, why in snapshot.errors.items()),
    ]
    return tuple(sorted(found, key=lambda f: f.severity is not Severity.UNHEALTHY))


def healthy(findings: tuple[Finding, ...]) -> bool:
    return not any(f.severity is Severity.UNHEALTHY for f in findings)


def _processes(snapshot: Snapshot) -> list[Finding]:
    out: list[Finding] = []
    up = snapshot.supervisor
    if up is None:
        out.append(
            Finding(
                Severity.WARNING,
                "toolgate up",
                f"no runtime file in {snapshot.home}: processes not known (not started by `toolgate up` here)",
            )
        )
    elif not up.alive:
        out.append(
            Finding(
                Severity.UNHEALTHY,
                "toolgate up",
                f"pid {up.pid} is not running: nothing restarts a worker that dies (the runtime file is stale)",
            )
        )
    for p in (*snapshot.processes, *snapshot.infrastructure):
        if p.pid is None:
            out.append(Finding(Severity.UNHEALTHY, p.name, "no process in the runtime file"))
        elif not p.alive:
            out.append(Finding(Severity.UNHEALTHY, p.name, f"pid {p.pid} is not running"))
        elif p.ready is False:
            out.append(Finding(Severity.WARNING, p.name, f"pid {p.pid} runs but has not said it is ready yet"))
        if p.restarts > 0:
            out.append(Finding(Severity.WARNING, p.name, f"restarted {p.restarts} time(s) by toolgate up"))
    return out


def _broker_nodes(cluster: BrokerCluster | None) -> list[Finding]:
    return [
        Finding(
            Severity.UNHEALTHY,
            node.name,
            f"{node.address} is not in the cluster's metadata: fenced, or still starting (it serves no partition)",
        )
        for node in (cluster.nodes if cluster is not None else ())
        if node.serving is False
    ]


def _lags(lags: tuple[Lag, ...], limits: Limits) -> list[Finding]:
    return [
        Finding(
            Severity.UNHEALTHY,
            lag.stage,
            f"{'at least ' if not lag.exact else ''}{lag.records} records behind on {', '.join(lag.topics)} "
            f"(bound {limits.max_lag})",
        )
        for lag in lags
        if lag.records is not None and lag.records > limits.max_lag
    ]


def _postgres(snapshot: Snapshot, limits: Limits) -> list[Finding]:
    out: list[Finding] = []
    keys, approvals, outbox = snapshot.keys, snapshot.approvals, snapshot.outbox
    if keys is not None and keys.most_overdue_s is not None and keys.most_overdue_s > limits.key_overdue_s:
        out.append(
            Finding(
                Severity.UNHEALTHY,
                "idempotency keys",
                f"{keys.lease_expired} PENDING past their lease, the longest by {keys.most_overdue_s:.0f} s "
                f"(bound {limits.key_overdue_s:.0f} s): reconciliation is not resolving them (is it running? "
                "does the provider answer its status query?)",
            )
        )
    if (
        approvals is not None
        and approvals.most_overdue_s is not None
        and approvals.most_overdue_s > limits.approval_overdue_s
    ):
        out.append(
            Finding(
                Severity.UNHEALTHY,
                "approvals",
                f"{approvals.past_expiry} PENDING past their expiry, the longest by {approvals.most_overdue_s:.0f} s "
                f"(bound {limits.approval_overdue_s:.0f} s): they should be AUTO_DENIED (is approval-wait running?)",
            )
        )
    if outbox is not None and outbox.oldest_age_s is not None and outbox.oldest_age_s > limits.max_outbox_age_s:
        retrying = f", {outbox.retrying} failed and retrying" if outbox.retrying else ""
        out.append(
            Finding(
                Severity.UNHEALTHY,
                "outbox",
                f"{outbox.unsent} rows unsent{retrying}, the oldest {outbox.oldest_age_s:.0f} s old "
                f"(bound {limits.max_outbox_age_s:.0f} s): is the outbox relay publishing?",
            )
        )
    return out


def _dead_letters(letters: DeadLetters | None) -> list[Finding]:
    out: list[Finding] = []
    if letters is not None and letters.open:
        out.append(
            Finding(
                Severity.WARNING, "dead letters", f"{letters.open} open, waiting for an operator (toolgate dlq list)"
            )
        )
    if letters is not None and letters.forged:
        out.append(
            Finding(
                Severity.WARNING,
                "dead letters",
                f"{letters.forged} forged: no toolgate stage wrote them (no valid MAC)",
            )
        )
    return out
