"""A header key that is not UTF-8 stops no reader of toolgate's, through the real `toolgate up`.

confluent-kafka's `Message.headers()` raises for such a key; every reader now takes a record
through one guarded reader (topics/consumed.py). On main, one such record crash-looped the stage
that read it (every partition, every tenant), killed a client's observation feed thread and its
`wait`, `ApprovalClient.requests`, `dlq list` and `dlq replay`, and the bench's readers. Here:
* a stage dead-letters the record with its raw key and value (no headers), commits past it, and
  answers every good call sent after it, and no worker restarts;
* a client's feed, `observations`, `wait`'s own read and `ApprovalClient.requests` skip it;
* `dlq list` (and `--json`, `show`) lists such a letter as forged, and `dlq replay` refuses it;
* the bench's collector and its hop reader skip it.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator

import pytest

from toolgate.client import ApprovalClient, ToolgateClient
from toolgate.kafka_security import ADMIN, APPROVALS
from toolgate.ops.bench.collector import Collector
from toolgate.ops.bench.hops import TopicTimes
from toolgate.ops.dlq import read_all
from toolgate.schemas.codec import codec
from toolgate.schemas.models import DeadLetter, PayloadKind, TaxonomyClass
from toolgate.topics.catalog import Topics
from toolgate.trust.agent_keys import AgentKeyring

from ..conftest import Pipeline, eventually
from .poison import Poisoner
from .test_gates import held_charge
from .test_pipeline import taxonomy

pytestmark = pytest.mark.timeout(300)

TOPICS = Topics()
FETCH = {"invoice_id": "inv_acme0001"}
# Every topic a stage reads: validation, policy, execution, normalization, approval-wait.
STAGE_TOPICS = ["proposals", "validated", "authorized", "executable", "results", "approvals_decisions"]


@pytest.fixture(scope="module")
def poisoner(pipeline: Pipeline) -> Iterator[Poisoner]:
    made = Poisoner(pipeline.kafka(ADMIN))  # it poisons internal topics too: the admin, secured
    yield made
    made.close()


def client_of(pipeline: Pipeline) -> ToolgateClient:
    """A client of its own (the session's shares its feed with every test)."""
    return ToolgateClient(
        pipeline.runtime["kafka_bootstrap"],
        client_id=f"pytest-{uuid.uuid4().hex[:6]}",
        keyring=AgentKeyring(pipeline.home / "agents"),
        deployment_public_key=bytes.fromhex(pipeline.runtime["deployment_public_key"]),
        # The bench's readers here read internal topics: on a secured cluster, as the admin.
        kafka_config=pipeline.insider.kafka_config,
    )


def test_a_stage_dead_letters_the_record_and_answers_every_call_after_it(
    pipeline: Pipeline, poisoner: Poisoner, no_restarts: None
) -> None:
    sent: dict[str, tuple[bytes, bytes]] = {}
    for logical in STAGE_TOPICS:
        for partition in range(4):
            mark = uuid.uuid4().hex
            key, value = f"poison-key-{mark}".encode(), f"poison on {logical}: {mark}".encode()
            poisoner.send(TOPICS.name(logical), value, key=key, partition=partition)
            sent[mark] = (key, value)
    calls = [pipeline.propose("invoice.fetch", FETCH) for _ in range(8)]
    assert [taxonomy(pipeline.wait(c, timeout=40)) for c in calls] == ["SUCCESS"] * 8

    def letters() -> dict[bytes, DeadLetter]:
        return {f.letter.value: f.letter for f in read_all(pipeline.settings) if f.genuine}

    found = eventually(lambda: (got := letters()) and all(v in got for _, v in sent.values()) and got, timeout=30)
    for key, value in sent.values():
        letter = found[value]
        assert (letter.key, letter.headers, letter.call_id) == (key, [], None)
        assert letter.taxonomy_class is TaxonomyClass.SYNTACTIC_PARSE_FAIL
        assert "headers cannot be read: a header key is not UTF-8" in letter.reason


def test_a_client_s_feed_its_wait_and_its_observations_read_past_it(pipeline: Pipeline, poisoner: Poisoner) -> None:
    topic = TOPICS.name("observations", "acme")
    watching, reading = client_of(pipeline), client_of(pipeline)
    try:
        watching.connect("acme")  # its feed opens where the topic ends now
        before = pipeline.client._end_offsets("acme")
        for partition in range(4):
            poisoner.send(topic, b"not an observation", key=b"run", partition=partition)
        # The feed reads past the poison to the answer.
        fed = watching.propose("invoice.fetch", FETCH, agent_id="cli", user_id="u", watch=True)
        assert watching.wait(fed, timeout=30).observation.status.taxonomy_class == "SUCCESS"
        # `wait` for a call no feed holds reads the topic from its start, poison and all.
        unwatched = reading.propose("invoice.fetch", FETCH, agent_id="cli", user_id="u")
        assert reading.wait(unwatched, timeout=30).call_id == unwatched.call_id
        # And `observations` (`toolgate observe`, the MCP door's call status).
        seen = list(watching.observations(tenant_id="acme", call_ids=[fed.call_id], start_offsets=before))
        assert [o.call_id for o in seen if o.is_final] == [fed.call_id]
        # The feed's thread is alive: a second call is heard too.
        again = watching.propose("invoice.fetch", FETCH, agent_id="cli", user_id="u", watch=True)
        assert watching.wait(again, timeout=30).call_id == again.call_id
    finally:
        watching.close()
        reading.close()


def test_approval_requests_read_past_it(pipeline: Pipeline, poisoner: Poisoner) -> None:
    poisoner.send(TOPICS.name("approvals_requested", "acme"), b"not a packet", key=b"appr")
    _, approval_id, _ = held_charge(pipeline)
    approver = ApprovalClient(
        pipeline.runtime["kafka_bootstrap"],
        client_id="pytest-approver-poison",
        deployment_public_key=bytes.fromhex(pipeline.runtime["deployment_public_key"]),
        kafka_config=pipeline.kafka(APPROVALS),  # as the approval service, secured
    )
    try:
        packets = [p.approval_id for p, _ in approver.requests(["acme"], idle_timeout=3.0)]
    finally:
        approver.close()
    assert approval_id in packets


def _letter(reason: str) -> DeadLetter:
    return DeadLetter(
        dead_letter_id=f"dl_{uuid.uuid4().hex[:24]}",
        call_id=f"call_{uuid.uuid4().hex}",
        stage="validation",
        source_topic="proposals",
        source_partition=0,
        source_offset=-1,
        payload_kind=PayloadKind.RECORD,
        value=b"replay me",
        taxonomy_class=TaxonomyClass.UNKNOWN_ERROR,
        reason=reason,
        dead_lettered_at_ms=int(time.time() * 1000),
    )


def test_dlq_lists_a_letter_it_cannot_read_as_forged_and_never_replays_it(
    pipeline: Pipeline, poisoner: Poisoner
) -> None:
    letter = _letter("a letter whose headers cannot be read")
    poisoner.send(TOPICS.deadletter, codec().encode(letter), key=letter.call_id.encode() if letter.call_id else None)
    pipeline.letters(lambda r: r["dead_letter_id"] == letter.dead_letter_id)
    listed = pipeline.cli("dlq", "list")
    assert listed.returncode == 0, listed.stderr
    (line,) = [ln for ln in listed.stdout.splitlines() if letter.dead_letter_id in ln]
    assert "forged" in line
    as_json = pipeline.cli("dlq", "list", "--json")
    assert as_json.returncode == 0, as_json.stderr
    (row,) = [r for r in json.loads(as_json.stdout) if r["dead_letter_id"] == letter.dead_letter_id]
    assert (row["state"], row["genuine"]) == ("forged", False)
    assert row["unreadable"].startswith("its headers cannot be read")
    shown = pipeline.cli("dlq", "show", letter.dead_letter_id)
    assert shown.returncode == 0 and json.loads(shown.stdout)["headers"] == {}
    replay = pipeline.cli("dlq", "replay", letter.dead_letter_id)
    assert replay.returncode != 0 and "its MAC cannot be checked" in replay.stderr and "Not replayed" in replay.stderr


def test_the_bench_s_readers_read_past_it(pipeline: Pipeline, poisoner: Poisoner) -> None:
    client = client_of(pipeline)
    run_prefix = f"bench_{uuid.uuid4().hex[:10]}_"
    try:
        collector = Collector(client, "acme", run_prefix, expected=1)
        times = TopicTimes(pipeline.settings, client, "acme")
        times.start()
        collector.start()
        run_key = f"{run_prefix}0".encode()
        poisoner.send(TOPICS.name("observations", "acme"), b"not an observation", key=run_key)
        poisoner.send(TOPICS.proposals, b"not a proposal", key=run_key)
        sent = client.propose("invoice.fetch", FETCH, agent_id="cli", user_id="bench", run_id=f"{run_prefix}0")
        assert collector.done.wait(30), "the bench's collector heard nothing"
        collector.join(5)
        assert list(collector.received) == [sent.call_id] and collector.forged == 1
        points = times.read({sent.call_id})[sent.call_id]
        assert {"proposals", "observation"} <= set(points)
    finally:
        client.close()
    assert not [t for t in threading.enumerate() if t is collector and t.is_alive()]
