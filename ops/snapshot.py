"""What `toolgate status` read of a running toolgate, as plain facts (ops/status.py gathers them,
ops/health.py judges them): its processes, each stage's consumer lag, the broker's nodes,
Postgres's backlogs and the dead letters, each aged when it was read."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Process:
    """One process named in the runtime file; `ready` only for stages (None: not a stage)."""

    name: str
    pid: int | None
    alive: bool
    ready: bool | None = None
    restarts: int = 0


@dataclass(frozen=True)
class Lag:
    """A stage's consumer lag: records on its topics past its group's committed offsets.

    `records` is None for a stage that reads Postgres, not Kafka (outbox relay, reconciliation);
    `exact` is False when the count was cut short and is only a lower bound."""

    stage: str
    group: str | None
    topics: tuple[str, ...] = ()
    records: int | None = None
    exact: bool = True
    partitions: int = 0
    committed_partitions: int = 0


@dataclass(frozen=True)
class BrokerNode:
    """One node of the broker: its name (as runtime.json gives it), the address it serves
    clients on, and whether the cluster's metadata lists it (None: not read)."""

    name: str
    address: str
    serving: bool | None = None


@dataclass(frozen=True)
class BrokerCluster:
    """Which broker toolgate runs on: "tansu", "kafka" (with its version) or "external" (one
    `toolgate up` did not start), and its nodes."""

    broker: str
    nodes: tuple[BrokerNode, ...] = ()
    version: str | None = None


@dataclass(frozen=True)
class Keys:
    pending: int
    oldest_age_s: float | None = None
    lease_expired: int = 0
    most_overdue_s: float | None = None  # since the longest-expired lease ran out


@dataclass(frozen=True)
class Approvals:
    pending: int
    oldest_age_s: float | None = None
    past_expiry: int = 0
    most_overdue_s: float | None = None  # since the longest-expired approval's expiry


@dataclass(frozen=True)
class Outbox:
    unsent: int
    oldest_age_s: float | None = None
    retrying: int = 0  # failed once and waiting for their next attempt


@dataclass(frozen=True)
class DeadLetters:
    open: int
    forged: int = 0


@dataclass(frozen=True)
class Snapshot:
    """What `toolgate status` read. A part it could not read is None, and `errors` says why."""

    home: str
    supervisor: Process | None  # `toolgate up` itself; None without a runtime file
    processes: tuple[Process, ...] = ()  # every stage, then the demo provider
    infrastructure: tuple[Process, ...] = ()  # the embedded broker and Postgres
    lags: tuple[Lag, ...] = ()
    keys: Keys | None = None
    approvals: Approvals | None = None
    outbox: Outbox | None = None
    dead_letters: DeadLetters | None = None
    errors: Mapping[str, str] = field(default_factory=dict)
    broker: BrokerCluster | None = None
