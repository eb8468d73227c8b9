"""The topic catalog: every topic's name, shape and retention, in one place, and provisioning.

Internal topics carry StageBatches and must have exactly as many partitions as
tool.proposals: a stage that consumed a round from partition p writes its batch to partition
p of the next topic, so a run's calls stay in order end to end without keys. The catalog
enforces it when it provisions.

The edge topics that carry a tenant's data exist once per tenant (`tool.observations.acme`,
`tool.approvals.requested.acme`), created when the tenant is registered, so that a tenant's
agents and approval services read only their own and Kafka ACLs can say so.

Replication follows the cluster's size (`Replication.for_brokers`): three replicas where there
are three brokers or more, and a write refused unless two of them took it (`min.insync.replicas`,
with the producers' `acks=all`), so one broker may fail without losing an acknowledged record or
stopping writes; on fewer brokers, as many replicas as brokers.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from confluent_kafka.admin import AdminClient, NewTopic

DAY_MS = 24 * 3600 * 1000


class Shape(StrEnum):
    EDGE = "edge"  # one record per call, keyed
    INTERNAL = "internal"  # one StageBatch per source partition and round


@dataclass(frozen=True)
class TopicSpec:
    logical: str
    name: str
    shape: Shape
    retention_ms: int
    key: str
    doc: str
    per_tenant: bool = False  # one topic per tenant: `<name>.<tenant>`
    # Read by toolgate's own processes only, so its records go compressed (settings.compression);
    # a topic that agents, approval services or operators' tools read stays plain, for clients
    # built without every codec.
    compressed: bool = False


CATALOG: tuple[TopicSpec, ...] = (
    TopicSpec(
        "proposals",
        "tool.proposals",
        Shape.EDGE,
        7 * DAY_MS,
        "run_id",
        "ToolProposal, written by agents, read by validation",
        compressed=True,
    ),
    TopicSpec(
        "validated",
        "tool.validated",
        Shape.INTERNAL,
        DAY_MS,
        "-",
        "StageBatch of StageRecord, validation -> policy",
        compressed=True,
    ),
    TopicSpec(
        "authorized",
        "tool.authorized",
        Shape.INTERNAL,
        DAY_MS,
        "-",
        "StageBatch of StageRecord, policy -> approval-wait",
        compressed=True,
    ),
    TopicSpec(
        "approvals_requested",
        "tool.approvals.requested",
        Shape.EDGE,
        30 * DAY_MS,
        "approval_id",
        "ApprovalRequest (confirmation packet), approval-wait -> approval services",
        per_tenant=True,
    ),
    TopicSpec(
        "approvals_decisions",
        "tool.approvals.decisions",
        Shape.EDGE,
        30 * DAY_MS,
        "approval_id",
        "ApprovalDecision (signed), approval services -> approval-wait",
        compressed=True,
    ),
    TopicSpec(
        "executable",
        "tool.executable",
        Shape.INTERNAL,
        DAY_MS,
        "-",
        "StageBatch of StageRecord, approval-wait and reconciliation -> execution",
        compressed=True,
    ),
    TopicSpec(
        "results",
        "tool.results",
        Shape.INTERNAL,
        DAY_MS,
        "-",
        "StageBatch of ExecutionResult, outbox relay and rejecting stages -> normalization",
        compressed=True,
    ),
    TopicSpec(
        "observations",
        "tool.observations",
        Shape.EDGE,
        7 * DAY_MS,
        "run_id",
        "Observation, normalization -> the tenant's agents",
        per_tenant=True,
    ),
    TopicSpec(
        "deadletter",
        "tool.deadletter",
        Shape.EDGE,
        30 * DAY_MS,
        "call_id",
        "DeadLetter (original bytes), any stage -> operators",
    ),
)

BY_LOGICAL = {t.logical: t for t in CATALOG}


def stage_group(prefix: str, stage: str) -> str:
    """The consumer group of a stage's workers, under the deployment's prefix (its workers join
    it, `toolgate status` reads its lag, the ACLs let the stage's principal use it)."""
    return f"{prefix}toolgate-{stage}"


class Topics:
    """Topic names under a deployment's prefix (tests run side by side with a uuid prefix)."""

    def __init__(self, prefix: str = "") -> None:
        self.prefix = prefix
        self._compressed: dict[str, bool] = {}

    def name(self, logical: str, tenant: str | None = None) -> str:
        spec = BY_LOGICAL[logical]
        if spec.per_tenant != (tenant is not None):
            raise KeyError(f"{spec.name} is {'per tenant' if spec.per_tenant else 'shared'}: tenant={tenant!r}")
        return f"{self.prefix}{spec.name}" + (f".{tenant}" if tenant is not None else "")

    def parse(self, name: str) -> tuple[str, str | None]:
        """(logical name, tenant) of a physical topic name; ("", None) for a foreign topic."""
        if name.startswith(self.prefix):
            rest = name[len(self.prefix) :]
            for spec in CATALOG:
                if rest == spec.name and not spec.per_tenant:
                    return spec.logical, None
                if spec.per_tenant and rest.startswith(spec.name + ".") and len(rest) > len(spec.name) + 1:
                    return spec.logical, rest[len(spec.name) + 1 :]
        return "", None

    def logical(self, name: str) -> str:
        logical = self.parse(name)[0]
        if not logical:
            raise KeyError(name)
        return logical

    def compressed(self, name: str) -> bool:
        """Whether records of the physical topic `name` may go compressed (a foreign topic's may
        not)."""
        known = self._compressed.get(name)
        if known is None:
            logical = self.parse(name)[0]
            known = self._compressed[name] = bool(logical) and BY_LOGICAL[logical].compressed
        return known

    def tenant_topics(self, tenant: str) -> list[str]:
        return [self.name(spec.logical, tenant) for spec in CATALOG if spec.per_tenant]

    def __getattr__(self, logical: str) -> str:
        if logical in BY_LOGICAL and not BY_LOGICAL[logical].per_tenant:
            return self.name(logical)
        raise AttributeError(logical)


class ProvisioningError(RuntimeError):
    pass


@dataclass(frozen=True)
class Replication:
    """How many copies of each partition a cluster keeps, and how many must take a write."""

    factor: int
    min_insync: int

    @classmethod
    def for_brokers(cls, brokers: int) -> Replication:
        factor = max(1, min(3, brokers))
        return cls(factor, max(1, factor - 1))

    def topic_config(self) -> dict[str, str]:
        """A topic's own settings for it (none on one broker: Kafka's defaults, as before)."""
        return {"min.insync.replicas": str(self.min_insync)} if self.factor > 1 else {}


def _names(topics: Topics, tenants: Iterable[str]) -> list[tuple[str, TopicSpec]]:
    shared = [(topics.name(spec.logical), spec) for spec in CATALOG if not spec.per_tenant]
    return shared + [
        (topics.name(spec.logical, tenant), spec)
        for tenant in sorted(set(tenants))
        for spec in CATALOG
        if spec.per_tenant
    ]


def provision(
    bootstrap: str,
    partitions: int,
    prefix: str = "",
    timeout: float = 30.0,
    tenants: Iterable[str] = (),
    client_config: dict[str, str] | None = None,
) -> list[str]:
    """Create the catalog's missing topics (the shared ones, and each tenant's), replicated as
    the cluster's size asks (`Replication.for_brokers`); verify the existing ones. Returns those
    created."""
    admin = AdminClient({**(client_config or {}), "bootstrap.servers": bootstrap})
    topics = Topics(prefix)
    tenants = list(tenants)
    metadata = admin.list_topics(timeout=timeout)
    replication = Replication.for_brokers(len(metadata.brokers))
    wanted = [
        NewTopic(
            name,
            num_partitions=partitions,
            replication_factor=replication.factor,
            config={"retention.ms": str(spec.retention_ms), **replication.topic_config()},
        )
        for name, spec in _names(topics, tenants)
        if name not in metadata.topics
    ]
    created: list[str] = []
    if wanted:
        for name, future in admin.create_topics(wanted, operation_timeout=timeout).items():
            try:
                future.result(timeout)
                created.append(name)
            except Exception as exc:  # confluent_kafka raises KafkaException wrapping KafkaError
                if "TOPIC_ALREADY_EXISTS" not in str(exc):
                    raise ProvisioningError(f"cannot create {name}: {exc}") from exc
    _verify(admin, topics, partitions, timeout, tenants)
    return created


def _verify(admin: AdminClient, topics: Topics, partitions: int, timeout: float, tenants: list[str]) -> None:
    """Every topic of the catalog is there, with its partitions. A topic just created reaches
    every broker's metadata a moment later (Kafka's brokers learn it from the controller): one
    not seen yet is looked for again until `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        metadata = admin.list_topics(timeout=timeout).topics
        missing = [name for name, _ in _names(topics, tenants) if name not in metadata]
        if not missing:
            break
        if time.monotonic() > deadline:
            raise ProvisioningError(f"topic {missing[0]} is missing after provisioning")
        time.sleep(0.1)
    for name, spec in _names(topics, tenants):
        count = len(metadata[name].partitions)
        if (spec.shape is Shape.INTERNAL or spec.logical == "proposals") and count != partitions:
            raise ProvisioningError(
                f"{name} has {count} partitions; internal topics need exactly {partitions}, as many as tool.proposals"
            )


def describe(prefix: str = "", tenants: Iterable[str] = ()) -> Iterable[tuple[str, TopicSpec]]:
    yield from _names(Topics(prefix), tenants)
