"""`toolgate status`: read a running system's health, and show it.

What it reads, each from where it is true:
* processes: the runtime file `toolgate up` writes (`$TOOLGATE_HOME/runtime.json`): its own pid,
  each stage's and the demo provider's (`workers`), the embedded broker's and Postgres's
  (`infrastructure`) and how often it restarted each (`restarts`); a pid counts as running
  when it exists and is no zombie, a stage as ready when it left its marker in `ready/`.
* consumer lag per stage: the records on the topics a stage reads (ops/acls.py `STAGE_RIGHTS`)
  past the offsets its consumer group (`<prefix>toolgate-<stage>`, the group id of
  workers/runtime/app.py) committed. The outbox relay and reconciliation read Postgres, not
  Kafka: they have no lag, and none is made up for them. A partition's end is *read*, not taken
  from its high watermark: Tansu reports the base offset of the last produce batch plus one
  (measured: 2 for a partition holding 1,001 records), so status reads from
  max(committed, reported high - 1) until librdkafka says the partition is at its end. Cut
  short after `LAG_READ_S`, a count is a lower bound, and says so.
* keys PENDING, approvals waiting, the outbox's unsent rows: Postgres, aged by its own `now()`
  (store/keys_reconciliation.py and store/outbox.py `backlog`).
* open dead letters: what `toolgate dlq list` shows (ops/dlq.py `listed`).
* the broker: which one `toolgate up` started (runtime.json's `broker_cluster`: Tansu, or Apache
  Kafka's nodes) and, for each node, whether the cluster's metadata lists its address (a node
  fenced or still starting is not listed); without a runtime file, the brokers the metadata lists.

Whatever cannot be read is recorded as an error, never guessed; ops/health.py judges the rest.
The lag is read by ops/lag.py, and the report shown by ops/status_view.py.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import psycopg
from confluent_kafka.admin import AdminClient

from toolgate.ops import dlq
from toolgate.ops.health import Finding, Limits, healthy, judge
from toolgate.ops.lag import KAFKA_TIMEOUT_S, admin_config, lags
from toolgate.ops.snapshot import Approvals, BrokerCluster, BrokerNode, DeadLetters, Keys, Outbox, Process, Snapshot
from toolgate.settings import Settings
from toolgate.store import keys_reconciliation, open_approvals
from toolgate.store import outbox as outbox_rows
from toolgate.workers.stages import STAGES

T = TypeVar("T")
# confluent-kafka leaves these two class methods unannotated; they return the specs below.

# --- processes -----------------------------------------------------------------------------


def running(pid: int) -> bool:
    """Whether a process exists and runs: not a zombie (a dead child its parent has not reaped
    yet), nor stopped (SIGSTOP)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True  # no procfs here: existing is all we can tell
    return state not in ("Z", "X", "T")


def _process(name: str, pid: Any, restarts: dict[str, Any], ready: Path | None = None, prefix: str = "") -> Process:
    count = int(restarts.get(name, 0))
    if not isinstance(pid, int) or pid <= 0:
        return Process(name, None, False, False if ready is not None else None, count)
    # A stage's ready marker is named with the deployment's topic prefix (workers/runtime/app.py).
    is_ready = (ready / f"{prefix}{name}.{pid}").exists() if ready is not None else None
    return Process(name, pid, running(pid), is_ready, count)


def processes(settings: Settings, runtime: dict[str, Any]) -> tuple[Process, tuple[Process, ...], tuple[Process, ...]]:
    """`toolgate up` itself; every stage then the other workers (the demo provider); the
    embedded infrastructure."""
    workers, restarts = runtime.get("workers", {}), runtime.get("restarts", {})
    ready, prefix = settings.home / "ready", settings.topic_prefix
    stages = [_process(stage, workers.get(stage), restarts, ready, prefix) for stage in STAGES]
    others = [_process(name, pid, restarts) for name, pid in workers.items() if name not in STAGES]
    infrastructure = [_process(name, pid, restarts) for name, pid in runtime.get("infrastructure", {}).items()]
    return _process("toolgate up", runtime.get("pid"), {}), (*stages, *others), tuple(infrastructure)


def unready_stages(settings: Settings) -> tuple[str, ...] | None:
    """The stages of this home's `toolgate up` that are not running with their partitions
    assigned (no ready marker yet); None without a runtime file: workers started some other way,
    whose readiness this host cannot see."""
    try:
        runtime = json.loads(settings.runtime_file.read_text())
    except FileNotFoundError:  # none, or `toolgate up` just stopped and took it away
        return None
    _, procs, _ = processes(settings, runtime)
    return tuple(p.name for p in procs if p.name in STAGES and not (p.alive and p.ready))


class NotReady(RuntimeError):
    """Stages that did not become ready in the time given."""


def await_ready(
    settings: Settings,
    timeout_s: float,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    poll_s: float = 0.1,
) -> float:
    """Wait until every stage of this home's `toolgate up` is ready, and return the seconds that
    took; raise NotReady, naming them, for those still not ready after `timeout_s`. Without a
    runtime file there is nothing to wait for."""
    started = clock()
    while pending := unready_stages(settings):
        if clock() - started >= timeout_s:
            raise NotReady(f"stages not ready after {timeout_s:g} s: {', '.join(pending)}")
        sleep(poll_s)
    return clock() - started


# --- the broker's nodes ---------------------------------------------------------------------


def listed_brokers(settings: Settings) -> set[str]:
    """The addresses of the brokers the cluster's metadata lists now."""
    brokers = AdminClient(admin_config(settings)).list_topics(timeout=KAFKA_TIMEOUT_S).brokers
    return {f"{b.host}:{b.port}" for b in brokers.values()}


def broker_cluster(runtime: dict[str, Any] | None, listed: set[str] | None) -> BrokerCluster:
    """The broker runtime.json names, each of its nodes marked serving when `listed` (the
    metadata's addresses; None: not read) has it; without a runtime file, the listed brokers."""
    described = (runtime or {}).get("broker_cluster") or {"broker": "external", "nodes": {}}
    nodes: dict[str, str] = dict(described.get("nodes") or {})
    if not nodes and listed:
        nodes = {address: address for address in sorted(listed)}
    serving = {name: (address in listed) if listed is not None else None for name, address in nodes.items()}
    return BrokerCluster(
        str(described["broker"]),
        tuple(BrokerNode(name, address, serving[name]) for name, address in nodes.items()),
        described.get("version"),
    )


# --- Postgres and dead letters ---------------------------------------------------------------


def backlogs(settings: Settings, conn: psycopg.Connection[Any] | None = None) -> tuple[Keys, Approvals, Outbox]:
    """Keys PENDING, approvals waiting, the outbox's unsent rows; on `conn` (autocommit, kept by
    the gauges) or a connection of its own."""
    if conn is None:
        with psycopg.connect(settings.database_url, connect_timeout=int(KAFKA_TIMEOUT_S), autocommit=True) as own:
            return backlogs(settings, own)
    keys = keys_reconciliation.backlog(conn)
    approvals = open_approvals.waiting(conn)
    outbox = outbox_rows.backlog(conn)
    return (
        Keys(keys.pending, keys.oldest_age_s, keys.lease_expired, keys.most_overdue_s),
        Approvals(approvals.pending, approvals.oldest_age_s, approvals.past_expiry, approvals.most_overdue_s),
        Outbox(outbox.unsent, outbox.oldest_age_s, outbox.retrying),
    )


def dead_letters(settings: Settings) -> DeadLetters:
    states = [row["state"] for row in dlq.listed(settings)]
    return DeadLetters(open=states.count("open"), forged=states.count("forged"))


# --- the report ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Report:
    snapshot: Snapshot
    limits: Limits
    findings: tuple[Finding, ...]

    @property
    def healthy(self) -> bool:
        return healthy(self.findings)

    def as_json(self) -> dict[str, Any]:
        s = self.snapshot
        lag = {lag.stage: asdict(lag) for lag in s.lags}
        return {
            "healthy": self.healthy,
            "findings": [asdict(f) for f in self.findings],
            "home": s.home,
            "supervisor": asdict(s.supervisor) if s.supervisor else None,
            "stages": [{**asdict(p), "lag": lag.get(p.name)} for p in s.processes if p.name in STAGES],
            "processes": [asdict(p) for p in s.processes if p.name not in STAGES],
            "infrastructure": [asdict(p) for p in s.infrastructure],
            "broker": asdict(s.broker) if s.broker is not None else None,
            **{
                name: asdict(part) if part is not None else None
                for name, part in (
                    ("keys", s.keys),
                    ("approvals", s.approvals),
                    ("outbox", s.outbox),
                    ("dead_letters", s.dead_letters),
                )
            },
            "errors": dict(s.errors),
            "limits": asdict(self.limits),
        }


def gather(settings: Settings) -> Snapshot:
    """Everything status shows; a part that cannot be read is None, with the reason in errors."""
    errors: dict[str, str] = {}

    def attempt(what: str, read: Callable[[], T]) -> T | None:
        try:
            return read()
        except Exception as exc:  # whatever the source raised, the report says it and goes on
            errors[what] = f"{type(exc).__name__}: {exc}"
            return None

    runtime: dict[str, Any] | None = None
    if settings.runtime_file.exists():
        runtime = attempt("runtime file", lambda: json.loads(settings.runtime_file.read_text()))
    supervisor: Process | None = None
    procs: tuple[Process, ...] = ()
    infra: tuple[Process, ...] = ()
    if runtime is not None:
        supervisor, procs, infra = processes(settings, runtime)
    broker = broker_cluster(runtime, attempt("broker", lambda: listed_brokers(settings)))
    found_lags = attempt("consumer lag", lambda: lags(settings)) or ()
    pg = attempt("postgres", lambda: backlogs(settings))
    keys, approvals, outbox = pg if pg is not None else (None, None, None)
    letters = attempt("dead letters", lambda: dead_letters(settings))
    return Snapshot(
        str(settings.home), supervisor, procs, infra, found_lags, keys, approvals, outbox, letters, errors, broker
    )


def limits_for(settings: Settings, **overrides: Any) -> Limits:
    limits = Limits.for_intervals(settings.reconcile_interval_seconds, settings.approval_sweep_seconds)
    return replace(limits, **{k: v for k, v in overrides.items() if v is not None})


def report(settings: Settings, limits: Limits) -> Report:
    snapshot = gather(settings)
    return Report(snapshot, limits, judge(snapshot, limits))
