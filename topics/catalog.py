"""The topic catalog: every topic's name, shape and retention, in one place, and provisioning.

Internal topics carry StageBatches and must have exactly as many partitions as
tool.proposals: a stage that consumed a round from partition p writes its batch to partition
p of the next topic, so a run's calls stay in order end to end without keys. The catalog
enforces it when it provisions.
"""

from __future__ import annotations

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


CATALOG: tuple[TopicSpec, ...] = (
    TopicSpec(
        "proposals",
        "tool.proposals",
        Shape.EDGE,
        7 * DAY_MS,
        "run_id",
        "ToolProposal, written by agents, read by validation",
    ),
    TopicSpec(
        "validated", "tool.validated", Shape.INTERNAL, DAY_MS, "-", "StageBatch of StageRecord, validation -> policy"
    ),
    TopicSpec(
        "authorized",
        "tool.authorized",
        Shape.INTERNAL,
        DAY_MS,
        "-",
        "StageBatch of StageRecord, policy -> approval-wait",
    ),
    TopicSpec(
        "approvals_requested",
        "tool.approvals.requested",
        Shape.EDGE,
        30 * DAY_MS,
        "approval_id",
        "ApprovalRequest (confirmation packet), approval-wait -> approval services",
    ),
    TopicSpec(
        "approvals_decisions",
        "tool.approvals.decisions",
        Shape.EDGE,
        30 * DAY_MS,
        "approval_id",
        "ApprovalDecision (signed), approval services -> approval-wait",
    ),
    TopicSpec(
        "executable",
        "tool.executable",
        Shape.INTERNAL,
        DAY_MS,
        "-",
        "StageBatch of StageRecord, approval-wait and reconciliation -> execution",
    ),
    TopicSpec(
        "results",
        "tool.results",
        Shape.INTERNAL,
        DAY_MS,
        "-",
        "StageBatch of ExecutionResult, outbox relay and rejecting stages -> normalization",
    ),
    TopicSpec(
        "observations", "tool.observations", Shape.EDGE, 7 * DAY_MS, "run_id", "Observation, normalization -> agents"
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


class Topics:
    """Topic names under a deployment's prefix (tests run side by side with a uuid prefix)."""

    def __init__(self, prefix: str = "") -> None:
        self.prefix = prefix

    def name(self, logical: str) -> str:
        return f"{self.prefix}{BY_LOGICAL[logical].name}"

    def logical(self, name: str) -> str:
        for spec in CATALOG:
            if f"{self.prefix}{spec.name}" == name:
                return spec.logical
        raise KeyError(name)

    def __getattr__(self, logical: str) -> str:
        if logical in BY_LOGICAL:
            return self.name(logical)
        raise AttributeError(logical)


class ProvisioningError(RuntimeError):
    pass


def provision(bootstrap: str, partitions: int, prefix: str = "", timeout: float = 30.0) -> list[str]:
    """Create the catalog's missing topics; verify the existing ones. Returns those created."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = Topics(prefix)
    existing = admin.list_topics(timeout=timeout).topics
    wanted = [
        NewTopic(
            topics.name(spec.logical),
            num_partitions=partitions,
            replication_factor=1,
            config={"retention.ms": str(spec.retention_ms)},
        )
        for spec in CATALOG
        if topics.name(spec.logical) not in existing
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
    _verify(admin, topics, partitions, timeout)
    return created


def _verify(admin: AdminClient, topics: Topics, partitions: int, timeout: float) -> None:
    metadata = admin.list_topics(timeout=timeout).topics
    for spec in CATALOG:
        name = topics.name(spec.logical)
        if name not in metadata:
            raise ProvisioningError(f"topic {name} is missing after provisioning")
        count = len(metadata[name].partitions)
        if (spec.shape is Shape.INTERNAL or spec.logical == "proposals") and count != partitions:
            raise ProvisioningError(
                f"{name} has {count} partitions; internal topics need exactly {partitions}, as many as tool.proposals"
            )


def describe(prefix: str = "") -> Iterable[tuple[str, TopicSpec]]:
    topics = Topics(prefix)
    for spec in CATALOG:
        yield topics.name(spec.logical), spec
