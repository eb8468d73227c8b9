"""The hostile-input suite: hypothesis writes what anyone with produce access could write, onto
every topic toolgate reads, through the real broker and Postgres.

Each example is a volley of records: signed proposals with wrong types, huge, empty and
deeply nested fields, duplicate keys and invalid UTF-8; unsigned and undecodable proposals,
unknown fingerprints and poisoned headers; garbage and mixed-up batches on the internal topics,
sealed and unsealed; garbage decisions; and records whose header keys are not UTF-8 (which
confluent-kafka cannot read back) on tool.proposals, the internal topics and the decisions topic.
Then a good proposal on every partition. Invariants:
* no worker process restarts;
* every identifiable proposal (a valid signature, a call_id and run_id within limits) gets
  exactly one final observation each time it is published, matched by the digest of what it
  proposed (a proposal drawn twice is the same call proposed twice, and is answered twice);
  but a copy refused for its signature's window, of a call a copy in the window bound, is
  dropped (one answer per call): where the rounds' order decides which came first, it gets at
  most one;
* every other record is dead-lettered with its original bytes;
* the good proposals succeed within seconds.

CI runs a few examples; `python -m pytest -m fuzz` runs the long version.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolgate.client import Observed
from toolgate.kafka_security import ADMIN
from toolgate.schemas.codec import MARKER, codec
from toolgate.schemas.models import (
    ApprovalDecision,
    ExecutionResult,
    Principal,
    StageBatch,
    StageRecord,
    ToolProposal,
)
from toolgate.topics.catalog import Topics
from toolgate.topics.headers import edge_headers, new_traceparent
from toolgate.trust.agent_keys import AgentKeyring, AgentSigner
from toolgate.trust.integrity import Sealer, deployment_keys
from toolgate.trust.proposal_signing import digest
from toolgate.workers.validation import limits

from ..conftest import Pipeline
from .poison import Poisoner

pytestmark = pytest.mark.timeout(1800)

TOPICS = Topics()
PARTITIONS = 4
TOOLS = ["invoice.fetch", "invoice.create_draft", "invoice.tax_estimate", "invoice.void_draft", "nope.tool", ""]
VERSIONS = ["latest", "1.x", "1.0.0", "0.9.0", "9.9.9", "", "x.y"]
INTERNAL = ["validated", "authorized", "executable", "results"]

JSON_LEAF = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=30)
JSON = st.recursive(
    JSON_LEAF,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)
ARGUMENT_TEXT = st.one_of(
    st.text(max_size=120),
    JSON.map(lambda v: json.dumps(v, allow_nan=True)),
    st.fixed_dictionaries({"invoice_id": st.text(max_size=40)}).map(json.dumps),
    st.integers(1, 100_000).map(lambda n: "[" * n + "]" * n),  # deep nesting
    st.just('{"invoice_id": "inv_acme0001", "invoice_id": "inv_globex0001"}'),  # duplicate keys
    st.integers(260_000, 400_000).map(lambda n: '{"memo": "' + "m" * n + '"}'),  # huge
    st.just(""),
)
FIELD = st.one_of(st.text(max_size=40), st.just(""), st.text(min_size=300, max_size=3000))


@dataclass
class Volley:
    # proposal digest -> how many times it was published: the digest is of what a proposal asks
    # for, so two draws of the same content are one call proposed twice, answered each time.
    answerable: Counter[str] = field(default_factory=Counter)
    # Copies refused for their window of a call a copy in the window may have bound first: at most one.
    maybe: Counter[str] = field(default_factory=Counter)
    dead: list[bytes] = field(default_factory=list)  # values that must come back as dead letters
    # digest -> what was published (for a failure to name the proposals it is about)
    described: dict[str, str] = field(default_factory=dict)
    decisions: int = 0
    # When its first record was published (ms): an answer completed before cannot be one of its
    # own. Hypothesis draws the same content in consecutive volleys (an empty call_id, the same
    # fields), so the same digest, and the high watermarks a volley's reading starts from can
    # under-count on the embedded broker: without this, an earlier volley's answer could count here.
    started_ms: int = field(default_factory=lambda: int(time.time() * 1000))


@st.composite
def signed_proposals(draw: Any) -> tuple[ToolProposal, bytes | None]:
    """A proposal the agent `cli` signs, with hostile fields; and, sometimes, argument bytes
    that are not UTF-8 to put on the wire instead of its text."""
    call_id = draw(st.one_of(st.just(f"call_{uuid.uuid4().hex}"), FIELD))
    run_id = draw(st.one_of(st.just(f"run_{uuid.uuid4().hex[:8]}"), FIELD))
    invalid_utf8 = draw(st.booleans()) and draw(st.booleans())
    raw = draw(st.binary(min_size=1, max_size=40)) + b"\xff" if invalid_utf8 else None
    proposal = ToolProposal(
        call_id=call_id,
        tenant_id=draw(st.sampled_from(["acme", "acme", "globex", "", "nobody"])),
        principal=Principal(
            user_id=draw(FIELD),
            agent_id="cli",
            scopes=draw(st.lists(st.sampled_from(["invoices:read", "invoices:write", "x" * 200, ""]), max_size=70)),
        ),
        workflow_id=draw(FIELD),
        run_id=run_id,
        logical_operation_id=draw(FIELD),
        tool_name=draw(st.sampled_from(TOOLS)),
        tool_version=draw(st.sampled_from(VERSIONS)),
        arguments=raw.decode("utf-8", "surrogateescape") if raw else draw(ARGUMENT_TEXT),
        idempotency_key=draw(st.one_of(st.none(), FIELD)),
        deadline_ms=draw(st.one_of(st.none(), st.integers(0, 2**53 - 1))),
        repair_attempt=draw(st.integers(0, 2**31 - 1)),
        dry_run=draw(st.booleans()),
        created_at_ms=int(time.time() * 1000) + draw(st.sampled_from([0, 0, 0, -(10**9), 10**9])),
    )
    return proposal, raw


def _on_the_wire(proposal: ToolProposal, raw: bytes | None) -> bytes:
    if raw is None:
        return codec().encode(proposal)
    placeholder = b"A" * len(raw)
    return codec().encode(proposal.model_copy(update={"arguments": placeholder.decode()})).replace(placeholder, raw, 1)


HEADERS = st.lists(
    st.tuples(
        st.sampled_from(["toolgate-attempts", "traceparent", "call_id", "tenant_id", "x"]), st.binary(max_size=60)
    ),
    max_size=4,
)


def publish_volley(
    pipeline: Pipeline, draw: Any, signer: AgentSigner, sealer: Sealer, poisoner: Poisoner, binding: set[str]
) -> Volley:
    """`binding`: the digests of proposals published in their window, which may have bound
    their call_id (grows with each volley)."""
    volley = Volley()
    client = pipeline.insider  # it forges internal topics too: on a secured cluster, only the admin may
    fp = codec().fingerprint_of(ToolProposal)
    for _ in range(draw(st.integers(5, 15))):
        kind = draw(
            st.sampled_from(
                ["signed", "signed", "signed", "unsigned", "garbage", "internal", "sealed", "decision", "header key"]
            )
        )
        partition = draw(st.integers(0, PARTITIONS - 1))
        extra = draw(HEADERS)
        if kind == "signed":
            proposal, raw = draw(signed_proposals())
            signed = signer.sign(proposal)
            value = _on_the_wire(signed, raw)
            headers = [*edge_headers(new_traceparent(), "c", "acme", fp), *extra]
            client.publish_raw(TOPICS.proposals, b"k", value, headers, partition)
            routable = (
                limits.routable(signed.call_id) is not None and len(signed.run_id) <= limits.FIELD_LIMITS["run_id"]
            )
            in_window = abs(signed.created_at_ms - int(time.time() * 1000)) < 60_000
            volley.described[digest(signed)] = _described(signed, partition, in_window)
            if not routable:
                volley.dead.append(value)
            elif in_window:
                binding.add(digest(signed))
                volley.answerable[digest(signed)] += 1
            elif digest(signed) in binding:
                volley.maybe[digest(signed)] = 1
            else:
                volley.answerable[digest(signed)] += 1
        elif kind == "unsigned":
            proposal, raw = draw(signed_proposals())
            value = _on_the_wire(proposal, raw)
            client.publish_raw(TOPICS.proposals, b"k", value, extra, partition)
            volley.dead.append(value)
        elif kind == "garbage":
            value = draw(
                st.one_of(
                    st.binary(max_size=300),
                    st.binary(max_size=300).map(lambda b: MARKER + b"\x00" * 8 + b),  # unknown fingerprint
                    st.binary(max_size=300).map(lambda b, fp=fp: MARKER + fp + b),  # corrupt body
                )
            )
            client.publish_raw(TOPICS.proposals, None, value, extra, partition)
            volley.dead.append(value)
        elif kind == "internal":  # anything, unsealed, on an internal topic
            value = draw(st.binary(max_size=300))
            client.publish_raw(TOPICS.name(draw(st.sampled_from(INTERNAL))), None, value, extra, partition)
            volley.dead.append(value)
        elif kind == "sealed":  # an insider's mixed-up batch: sealed, but its items are wrong
            topic = TOPICS.name(draw(st.sampled_from(INTERNAL)))
            items = draw(st.lists(st.binary(max_size=200), min_size=1, max_size=3))
            model = ExecutionResult if topic == TOPICS.results else StageRecord  # what its stage reads
            produced = int(time.time() * 1000) - draw(st.sampled_from([0, 0, 0, 86_400_000]))  # or a day old
            batch = StageBatch(
                stage="fuzz", source_partition=partition, items=items, produced_at_ms=produced, first_produced_at_ms=0
            )
            value = codec().encode(batch)
            client.publish_raw(topic, None, value, sealer.seal(topic, None, value, []), partition)
            fresh = produced > int(time.time() * 1000) - 60_000
            volley.dead += [i for i in items if not _decodes(i, model)] if fresh else [value]
        elif kind == "header key":
            poison_header_key(draw, poisoner, draw(st.sampled_from(HEADER_KEY_TOPICS)), partition, extra, volley)
        else:
            value = draw(st.one_of(st.binary(max_size=200), st.binary(max_size=200).map(lambda b: MARKER + b)))
            client.publish_raw(TOPICS.approvals_decisions, b"appr", value, extra, partition)
            if not _decodes(value, ApprovalDecision):
                volley.dead.append(value)
    for logical in ("proposals", draw(st.sampled_from(INTERNAL)), "approvals_decisions"):  # in every volley
        poison_header_key(draw, poisoner, logical, draw(st.integers(0, PARTITIONS - 1)), draw(HEADERS), volley)
    client.flush()
    return volley


HEADER_KEY_TOPICS = ["proposals", *INTERNAL, "approvals_decisions"]


def poison_header_key(
    draw: Any, poisoner: Poisoner, logical: str, partition: int, extra: list[tuple[str, bytes]], volley: Volley
) -> None:
    """A record with a header key that is not UTF-8: dead-lettered with its key and value."""
    value = draw(st.binary(max_size=300))
    key = draw(st.none() | st.binary(max_size=20))
    poisoner.send(TOPICS.name(logical), value, key=key, partition=partition, headers=extra)
    volley.dead.append(value)


def _decodes(value: bytes, cls: type) -> bool:
    try:
        codec().decode(value, cls)
    except Exception:
        return False
    return True


def good_proposals_succeed(pipeline: Pipeline, signer: AgentSigner) -> None:
    fp = codec().fingerprint_of(ToolProposal)
    sent = []
    start = pipeline.client._end_offsets("acme")
    for partition in range(PARTITIONS):
        run_id = f"run_{uuid.uuid4().hex[:8]}"
        good = signer.sign(
            ToolProposal(
                call_id=f"call_{uuid.uuid4().hex}",
                tenant_id="acme",
                principal=Principal(user_id="u", agent_id="cli", scopes=["invoices:read"]),
                workflow_id=run_id,
                run_id=run_id,
                logical_operation_id="op",
                tool_name="invoice.fetch",
                arguments='{"invoice_id": "inv_acme0001"}',
                created_at_ms=int(time.time() * 1000),
            )
        )
        headers = edge_headers(new_traceparent(), good.call_id, "acme", fp)
        pipeline.client.publish_raw(TOPICS.proposals, run_id.encode(), codec().encode(good), headers, partition)
        sent.append(good.call_id)
    pipeline.client.flush()
    deadline = time.monotonic() + 30
    succeeded: set[str] = set()
    while succeeded != set(sent) and time.monotonic() < deadline:
        for seen in pipeline.client.observations(
            tenant_id="acme", call_ids=sent, start_offsets=start, idle_timeout=1.0
        ):
            if seen.observation.status.taxonomy_class == "SUCCESS":
                succeeded.add(seen.call_id)
    assert succeeded == set(sent), "a good proposal did not succeed after the volley"


def check(pipeline: Pipeline, volley: Volley, start: Any) -> None:
    from toolgate.ops.dlq import read_all

    def final_observations() -> Counter[str]:
        return Counter(
            o.proposal_digest
            for o in pipeline.client.observations(tenant_id="acme", start_offsets=start, idle_timeout=1.5)
            if o.is_final
            and (o.proposal_digest in volley.answerable or o.proposal_digest in volley.maybe)
            and completed_ms(o) >= volley.started_ms
        )

    deadline = time.monotonic() + 60
    finals = final_observations()
    while time.monotonic() < deadline and not finals >= volley.answerable:
        finals = final_observations()
    missing = volley.answerable - finals
    assert not missing, f"{missing.total()} identifiable proposals without a final observation: " + "; ".join(
        volley.described[d] for d in missing
    )
    finals = final_observations()  # once more: an extra answer arriving late is seen too
    extra = finals - (volley.answerable + volley.maybe)
    assert not extra, f"more than one final observation per publish: {extra.most_common(3)}"
    letters: set[bytes] = set()
    while time.monotonic() < deadline:
        letters = {f.letter.value for f in read_all(pipeline.settings) if f.genuine}
        if all(v in letters for v in volley.dead):
            break
    lost = [v for v in volley.dead if v not in letters]
    assert not lost, f"{len(lost)} records neither answered nor dead-lettered, e.g. {lost[0][:40]!r}"


def _described(proposal: ToolProposal, partition: int, in_window: bool) -> str:
    return (
        f"{proposal.tool_name!r} call_id={proposal.call_id[:40]!r} tenant={proposal.tenant_id!r} "
        f"partition {partition}, {'in' if in_window else 'out of'} its window "
        f"({proposal.created_at_ms - int(time.time() * 1000):+d} ms), digest {digest(proposal)[:12]}"
    )


def completed_ms(seen: Observed) -> int:
    """When the answer was made (its execution metadata's timestamp), in ms since the epoch."""
    stamp = dt.datetime.fromisoformat(seen.observation.execution_metadata.timestamp)
    return int(stamp.timestamp() * 1000)


def run_suite(pipeline: Pipeline, examples: int) -> None:
    signer = AgentKeyring(pipeline.home / "agents").signer("cli")
    sealer = Sealer(deployment_keys(pipeline.settings), TOPICS)
    workers = dict(pipeline.refresh_runtime()["workers"])
    restarts = (pipeline.home / "up.out").read_text().count("restarting")
    tally = Counter[str]()
    binding: set[str] = set()
    poisoner = Poisoner(pipeline.kafka(ADMIN))  # it poisons internal topics too: the admin, secured

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.data())
    def volley(data: st.DataObject) -> None:
        start = pipeline.client._end_offsets("acme")
        sent = publish_volley(pipeline, data.draw, signer, sealer, poisoner, binding)
        good_proposals_succeed(pipeline, signer)
        check(pipeline, sent, start)
        tally.update(answered=sent.answerable.total(), dead_lettered=len(sent.dead), volleys=1)

    try:
        volley()
    finally:
        poisoner.close()
    assert pipeline.refresh_runtime()["workers"] == workers, "a worker restarted"
    assert (pipeline.home / "up.out").read_text().count("restarting") == restarts
    print(f"\nhostile suite: {dict(tally)}")


def test_hostile_records_on_every_topic(pipeline: Pipeline) -> None:
    run_suite(pipeline, examples=int(os.environ.get("TOOLGATE_HOSTILE_EXAMPLES", "3")))


@pytest.mark.fuzz
def test_hostile_records_on_every_topic_long(pipeline: Pipeline) -> None:
    run_suite(pipeline, examples=int(os.environ.get("TOOLGATE_HOSTILE_EXAMPLES", "60")))
