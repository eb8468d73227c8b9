"""The trust boundary as the broker enforces it: `toolgate up --broker kafka --secure` applies
`setup --acls` for real, and each principal may do what its bindings say and nothing else.

Every refusal asserted here is the broker's own (an authorization error code in a KafkaError from
the broker's answer: TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED,
CLUSTER_AUTHORIZATION_FAILED), never toolgate's; and each is shown not to be vacuous: the same
client code, connected as a principal the plan allows, is served.

It runs only when the session's Kafka is secured (TOOLGATE_TEST_BROKER=kafka
TOOLGATE_TEST_KAFKA_SECURE=1): the embedded Tansu has no authentication nor authorizer.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from toolgate.kafka_security import ADMIN, APPROVALS, DOOR, agent_role, stage_role
from toolgate.ops.acl_prune import delete
from toolgate.ops.acls import DOOR_PRINCIPAL
from toolgate.ops.kafka_credentials import client_settings, provision_credentials, stage_user
from toolgate.ops.stack.kafka_tls import Certificates
from toolgate.settings import Settings
from toolgate.topics.catalog import Topics, stage_group
from toolgate.workers.stages import STAGES

from ..conftest import Pipeline, session_secure

pytestmark = pytest.mark.skipif(
    not session_secure(),
    reason="the broker's own authorization: the session's Kafka is not secured "
    "(TOOLGATE_TEST_BROKER=kafka TOOLGATE_TEST_KAFKA_SECURE=1 runs it)",
)
TOPICS = Topics()
TOPIC_REFUSED = KafkaError.TOPIC_AUTHORIZATION_FAILED
GROUP_REFUSED = KafkaError.GROUP_AUTHORIZATION_FAILED
CLUSTER_REFUSED = KafkaError.CLUSTER_AUTHORIZATION_FAILED
WAIT_S = 30.0
# Internal topics: only toolgate's stages write them (and the operator some of them).
INTERNAL = (
    TOPICS.validated,
    TOPICS.authorized,
    TOPICS.executable,
    TOPICS.results,
    TOPICS.deadletter,
    TOPICS.approvals_decisions,
    TOPICS.name("approvals_requested", "acme"),
    TOPICS.name("observations", "acme"),
)


@dataclass
class Read:
    """What a reader got: records, the partitions it read to their end, or the broker's refusal."""

    records: list[Message] = field(default_factory=list)
    ends: set[int] = field(default_factory=set)
    refusal: KafkaError | None = None


def read(config: dict[str, str], topic: str, partitions: int, group: str | None = None) -> Read:
    """Read `topic` from its beginning to its end, subscribed in `group` (an observer's unless
    given). Subscribed, not assigned: librdkafka reports a topic the broker refuses to describe
    to a subscriber (TOPIC_AUTHORIZATION_FAILED), while an assignment of it only stays unfetched."""
    consumer = Consumer(
        {
            **config,
            "group.id": group or f"toolgate-observer-acl-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
        }
    )
    got = Read()
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline and len(got.ends) < partitions:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            error = msg.error()
            if error is None:
                got.records.append(msg)
            elif error.code() == KafkaError._PARTITION_EOF:
                got.ends.add(msg.partition() or 0)
            else:
                got.refusal = error
                break
    finally:
        consumer.close()
    return got


def write(config: dict[str, str], topic: str, value: bytes = b"acl-test") -> KafkaError | None:
    """Produce one record onto `topic` (partition 0); the broker's refusal, or None if it took it."""
    delivered: list[KafkaError | None] = []
    producer = Producer({**config, "message.timeout.ms": int(WAIT_S * 1000), "enable.idempotence": False})
    try:
        producer.produce(topic, value, partition=0, on_delivery=lambda err, _msg: delivered.append(err))
    except KafkaException as exc:  # refused before the send (the topic's metadata said so)
        error: KafkaError = exc.args[0]
        return error
    assert producer.flush(WAIT_S) == 0, "no answer from the broker"
    [answer] = delivered
    return answer


def granting(config: dict[str, str], binding: AclBinding) -> KafkaError | None:
    """Ask the cluster to create an ACL binding; the broker's refusal, or None if it made it."""
    admin = AdminClient(config)  # held until the answer: a client dropped first cancels its request
    try:
        admin.create_acls([binding], request_timeout=WAIT_S)[binding].result(WAIT_S)
    except KafkaException as exc:
        error: KafkaError = exc.args[0]
        return error
    return None


def reading(principal: str, topic: str) -> AclBinding:
    return AclBinding(
        ResourceType.TOPIC,
        topic,
        ResourcePatternType.LITERAL,
        principal,
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )


def refused(error: KafkaError | None, code: int) -> str:
    """Assert the broker refused with `code`; the refusal's text, for the report."""
    assert error is not None, "the broker allowed it"
    assert error.code() == code, f"{error.name()}: {error.str()}"
    return str(error.str())


def added_agent(pipeline: Pipeline, prefix: str) -> tuple[str, dict[str, str]]:
    """An agent of acme added with `agents add`, and its client's settings, once it has read
    its tenant's answers and written a proposal (a record that is not one) as itself."""
    agent = f"{prefix}-{uuid.uuid4().hex[:8]}"
    added = pipeline.cli("agents", "add", agent, "--tenant", "acme", "--scopes", "invoices:read")
    assert added.returncode == 0, added.stdout + added.stderr
    mine = as_user(pipeline, agent)
    seen = read(mine, TOPICS.name("observations", "acme"), int(pipeline.runtime["partitions"]))
    assert seen.refusal is None and seen.records
    assert write(mine, TOPICS.proposals, b"acl-test: not a proposal") is None
    return agent, mine


def as_user(pipeline: Pipeline, user: str) -> dict[str, str]:
    """A client's settings as `user` of the home (its password from the home's secrets)."""
    certificates = Certificates(pipeline.home / "kafka" / "tls")
    return {**client_settings(user, certificates, pipeline.home / "secrets"), "bootstrap.servers": bootstrap(pipeline)}


def bootstrap(pipeline: Pipeline) -> str:
    return str(pipeline.runtime["kafka_bootstrap"])


def give_credentials(pipeline: Pipeline, user: str) -> None:
    """What an operator does for a new principal: its SCRAM credential, made by the admin."""
    provision_credentials(AdminClient(pipeline.kafka(ADMIN)), [user], pipeline.home / "secrets")


def setup_acls(pipeline: Pipeline, *arguments: str) -> None:
    done = pipeline.cli("setup", "--acls", *arguments, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture(scope="module")
def answered(pipeline: Pipeline) -> str:
    """One call answered on each demo tenant's observation topic; acme's call id."""
    acme = pipeline.call("invoice.fetch", {"invoice_id": "inv_acme0001"})
    pipeline.call("invoice.fetch", {"invoice_id": "inv_globex0001"}, tenant_id="globex")
    return str(acme["tool_identity"]["call_id"])


def test_an_agent_cannot_read_another_tenant_s_observations(pipeline: Pipeline, answered: str) -> None:
    partitions = int(pipeline.runtime["partitions"])
    acme_agent = pipeline.kafka(agent_role("cli"))
    globex = TOPICS.name("observations", "globex")
    refused(read(acme_agent, globex, partitions).refusal, TOPIC_REFUSED)
    # Nor by joining a group that is not an observer's (a stage's, to take its records).
    refused(read(acme_agent, globex, partitions, group=stage_group("", "normalization")).refusal, GROUP_REFUSED)
    # Not vacuous: the same reader as acme's agent reads acme's answers, as globex's agent globex's.
    own = read(acme_agent, TOPICS.name("observations", "acme"), partitions)
    assert own.refusal is None and own.records
    theirs = read(pipeline.kafka(agent_role("globex-cli")), globex, partitions)
    assert theirs.refusal is None and theirs.records


def test_an_agent_cannot_write_any_internal_topic_nor_grant_itself_a_right(pipeline: Pipeline, answered: str) -> None:
    agent = pipeline.kafka(agent_role("cli"))
    for topic in INTERNAL:
        refused(write(agent, topic), TOPIC_REFUSED)
    # Nor grant itself what it lacks: the cluster's ACLs are the admin's to change.
    refused(granting(agent, reading("User:cli", TOPICS.name("observations", "globex"))), CLUSTER_REFUSED)
    # Not vacuous: the agent may propose (a real call, answered), the validation stage may write
    # what it writes, and the admin may read the bindings.
    sent = pipeline.propose("invoice.fetch", {"invoice_id": "inv_acme0001"})
    assert pipeline.wait(sent)["status"]["taxonomy_class"] == "SUCCESS"
    assert write(agent, TOPICS.proposals, b"acl-test: not a proposal") is None
    assert write(pipeline.kafka(stage_role("validation")), TOPICS.validated) is None
    probe = reading(f"User:acl-probe-{uuid.uuid4().hex[:6]}", "acl-probe")  # a right nobody uses
    admin = AdminClient(pipeline.kafka(ADMIN))
    assert granting(pipeline.kafka(ADMIN), probe) is None
    delete(admin, [probe])


def test_a_stage_cannot_write_outside_its_outputs(pipeline: Pipeline) -> None:
    validation = pipeline.kafka(stage_role("validation"))
    for topic in (
        TOPICS.executable,
        TOPICS.authorized,
        TOPICS.name("observations", "acme"),
        TOPICS.approvals_decisions,
    ):
        refused(write(validation, topic), TOPIC_REFUSED)
    # Not vacuous: the stage whose output executable is may write it, and validation its own.
    assert write(pipeline.kafka(stage_role("approval-wait")), TOPICS.executable, b"acl-test") is None
    assert write(validation, TOPICS.validated) is None
    assert stage_user("validation") == "toolgate-validation"


def test_no_worker_is_refused_anything_by_the_broker(pipeline: Pipeline, answered: str) -> None:
    # Each stage's bindings cover all it does. Before, reconciliation and the outbox relay made
    # a stage producer they never use; reconciliation's principal may write nothing, so its
    # idempotent producers failed for good at start (the broker refused them a producer id:
    # CLUSTER_AUTHORIZATION_FAILED) and their report threads died.
    for stage in STAGES:
        log = (pipeline.home / "logs" / f"{stage}.log").read_text(errors="replace")
        refusals = [line for line in log.splitlines() if "authorization failed" in line.lower()]
        assert not refusals, f"{stage}: {refusals[:3]}"
        assert "Exception in thread" not in log, stage


def test_the_gauges_are_refused_nothing_by_the_broker(pipeline: Pipeline, answered: str) -> None:
    """Reconciliation's gauges read the stages' lag and the open dead letters with assigning
    consumers under its own principal. Before, its bindings had no dead-letter topic and no group
    for those consumers: the broker refused it every sample (the letters' count never read), which
    its log does not show, only the brokers' authorizer log does."""
    denied = re.compile(r"Principal = User:toolgate-reconciliation is Denied .*")
    log_path = pipeline.home / "logs" / "reconciliation.log"
    ready = next(json.loads(line)["ts"] for line in log_path.read_text().splitlines() if '"ready"' in line)
    # A sample at the start, then one every metrics_sample_seconds: past the second one.
    time.sleep(max(0.0, ready + Settings().metrics_sample_seconds + 2 - time.time()))
    refusals = [
        match.group(0)[:300]
        for log in sorted((pipeline.home / "logs").glob("kafka-*.log"))
        for match in denied.finditer(log.read_text(errors="replace"))
    ]
    assert not refusals, refusals[:3]
    assert "gauge sample failed" not in log_path.read_text(errors="replace")


def test_an_approval_service_reads_only_its_tenants_packets(pipeline: Pipeline) -> None:
    give_credentials(pipeline, "approvals-acme")
    setup_acls(
        pipeline, "--approval-service", "User:toolgate-approvals", "--approval-service", "User:approvals-acme=acme"
    )
    partitions = int(pipeline.runtime["partitions"])
    limited = as_user(pipeline, "approvals-acme")
    refused(read(limited, TOPICS.name("approvals_requested", "globex"), partitions).refusal, TOPIC_REFUSED)
    refused(read(limited, TOPICS.name("observations", "acme"), partitions).refusal, TOPIC_REFUSED)
    # Not vacuous: it reads acme's packets to their end, and the demo service (every tenant) globex's.
    assert read(limited, TOPICS.name("approvals_requested", "acme"), partitions).refusal is None
    every = read(pipeline.kafka(APPROVALS), TOPICS.name("approvals_requested", "globex"), partitions)
    assert every.refusal is None and every.ends == set(range(partitions))


def test_an_agent_added_on_the_secured_home_proposes_and_reads_its_tenant_s_answers_at_once(
    pipeline: Pipeline, answered: str
) -> None:
    # `agents add` alone: its SCRAM credential and its bindings come with it, nothing else to run.
    _, mine = added_agent(pipeline, "new")
    partitions = int(pipeline.runtime["partitions"])
    refused(read(mine, TOPICS.name("observations", "globex"), partitions).refusal, TOPIC_REFUSED)


def test_a_revoked_agent_loses_its_bindings(pipeline: Pipeline, answered: str, tmp_path: Path) -> None:
    agent, mine = added_agent(pipeline, "acl")
    partitions = int(pipeline.runtime["partitions"])

    revoked = pipeline.cli("agents", "revoke", agent)
    assert revoked.returncode == 0, revoked.stdout + revoked.stderr
    setup_acls(pipeline, "--prune")

    # Its credential still authenticates it; the broker has no binding left for it: not the
    # observers' groups (its reader is refused before it asks for the topic), nor the topics.
    refused(read(mine, TOPICS.name("observations", "acme"), partitions).refusal, GROUP_REFUSED)
    refused(write(mine, TOPICS.proposals), TOPIC_REFUSED)
    refused(write(mine, TOPICS.name("observations", "acme")), TOPIC_REFUSED)
    # Not vacuous: the agents still registered keep theirs.
    assert write(pipeline.kafka(agent_role("cli")), TOPICS.proposals, b"acl-test: not a proposal") is None


def test_the_mcp_door_has_exactly_what_it_needs(pipeline: Pipeline, answered: str) -> None:
    door = pipeline.kafka(DOOR)
    partitions = int(pipeline.runtime["partitions"])
    # What it needs: propose (a real call, answered), read its tenants' observations, and write its
    # agents' withdrawals (a decision approval-wait counts only when the call's agent signed it).
    assert pipeline.client.kafka_config["sasl.username"] == "toolgate-mcp"  # the session's client is the door
    sent = pipeline.propose("invoice.fetch", {"invoice_id": "inv_globex0001"}, tenant_id="globex")
    assert pipeline.wait(sent)["status"]["taxonomy_class"] == "SUCCESS"
    for tenant in ("acme", "globex"):
        seen = read(door, TOPICS.name("observations", tenant), partitions)
        assert seen.refusal is None and seen.records
    # Nothing more: no internal topic read or written, not even the proposals it writes read back.
    for topic in (TOPICS.proposals, TOPICS.validated, TOPICS.executable, TOPICS.deadletter):
        refused(read(door, topic, partitions).refusal, TOPIC_REFUSED)
    refused(read(door, TOPICS.name("approvals_requested", "acme"), partitions).refusal, TOPIC_REFUSED)
    assert write(door, TOPICS.approvals_decisions, b"acl-test: not a withdrawal") is None
    for topic in (TOPICS.executable, TOPICS.results, TOPICS.name("observations", "acme")):
        refused(write(door, topic), TOPIC_REFUSED)
    refused(granting(door, reading(DOOR_PRINCIPAL, TOPICS.proposals)), CLUSTER_REFUSED)
