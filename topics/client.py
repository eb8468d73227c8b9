"""Typed clients for the edge topics, for agents and approval services (confluent-kafka).

    client = ToolgateClient.from_settings()
    sent = client.propose("invoice.fetch", {"invoice_id": "inv_acme0001"},
                          agent_id="billing-agent", user_id="u1", scopes=["invoices:read"])
    obs = client.wait(sent)            # the final Observation of that call

Every proposal is signed with the agent's key (from the local keyring, or an AgentSigner the
caller holds); toolgate takes the tenant and the granted scopes from its registry, never from
the record. An agent with several calls to make at once prepares each and publishes them
together: they are signed under one signature (a Merkle root, `proposal_signing.sign_all`), so
the agent signs once and validation checks once for up to TREE_MAX calls:

    drafts = [client.prepare("invoice.fetch", {"invoice_id": i}, agent_id="billing-agent",
                             user_id="u1", watch=True) for i in ids]
    sent = client.publish(drafts)      # one Proposed each, as `propose` returns

Proposals are keyed by run_id (one run stays in order); observations come back on
the tenant's own topic, keyed by run_id, with the call_id and the digest of the proposal they
answer in headers, signed by the deployment. The client checks that signature (by default) and
the digest, so only toolgate's answer to what it proposed is accepted. A call that waits for
approval first gets an interim observation (status code 202); `wait` returns the final one
unless asked otherwise.

Kafka is the transport, not the record: a broker that loses its topics loses proposals in
flight. So `wait` re-publishes a call that has no final observation yet, byte for byte (the
same call_id, logical operation and idempotency key, the same signature), backing off, until
the call's deadline. toolgate answers a re-published call as the same call: a read runs again,
a write replays its stored result, a held call re-announces its pending approval; none is a
second effect.
"""

from __future__ import annotations

import json
import logging
import os
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, TopicPartition
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from opentelemetry import trace

from toolgate.agent_keys import AgentKeyring, AgentSigner
from toolgate.deployment_keys import deployment_keys, public_keys_of
from toolgate.integrity import EdgeVerifier
from toolgate.kafka_security import client_config
from toolgate.schemas.codec import DecodeError, codec
from toolgate.schemas.models import ApprovalDecision, ApprovalRequest, Observation, Principal, ToolProposal, Verdict
from toolgate.secrets import SecretProvider
from toolgate.settings import Settings, load_settings
from toolgate.signing import sign
from toolgate.topics.catalog import Topics
from toolgate.topics.consumed import Consumed, Unreadable, read, skipped
from toolgate.topics.headers import (
    CALL_ID,
    PROPOSAL_DIGEST,
    TRACEPARENT,
    edge_headers,
    format_traceparent,
    header,
    new_traceparent,
)
from toolgate.topics.observer import FETCH_WAIT_MS, ObservationFeed
from toolgate.topics.producers import Producers

log = logging.getLogger("toolgate.client")

INTERIM_CODE = 202
# Re-publishing a call that has no final answer yet: first after RESEND_FIRST_S, then twice as
# long each time up to RESEND_MAX_S; a held call (its interim answer came) only every
# RESEND_MAX_S. Never past the call's deadline, nor past the end of its signature's window, less
# a margin (`resend_window_s`): toolgate refuses a signature older than its proposal window
# (TOOLGATE_PROPOSAL_MAX_AGE_SECONDS, 900 s by default) as stale, and a copy that arrives stale
# is never answered (validation drops it), so a client that re-published past the window would
# only wait longer.
RESEND_FIRST_S = 10.0
RESEND_MAX_S = 60.0
PROPOSAL_MAX_AGE_S = 900.0  # the deployment's default proposal window (settings)
RESEND_CHECK_S = 0.2  # how often a waiting call checks whether re-publishing is due
IDLE_S = 0.5  # a bounded scan (`latest_of`) ends once nothing arrived for this long
# Proposals published together are signed in trees of at most this many: one signature for 64
# calls, and a path of 6 steps (198 bytes) in each.
TREE_MAX = 64


@dataclass(frozen=True)
class Record:
    """A proposal as published: what re-publishing it sends again."""

    topic: str
    key: bytes
    value: bytes
    headers: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class Draft:
    """A proposal made (`ToolgateClient.prepare`), signed and sent when it is published."""

    proposal: ToolProposal
    signer: AgentSigner
    start_offsets: tuple[tuple[int, int], ...] = ()  # observation offsets before publishing


@dataclass(frozen=True)
class Proposed:
    call_id: str
    run_id: str
    traceparent: str
    created_at_ms: int
    start_offsets: tuple[tuple[int, int], ...] = ()  # observation offsets before publishing
    tenant_id: str = ""  # where the answer comes: the agent's own tenant
    proposal_digest: str = ""  # what toolgate's answer must name
    record: Record | None = None  # the bytes published, for `wait` to re-publish
    deadline_ms: int | None = None
    resend_within_ms: int = int(1000 * (PROPOSAL_MAX_AGE_S - 60))  # resend_window_s of the deployment's window

    def resend_until_ms(self) -> int:
        """When re-publishing stops: the deadline, or the end of the signature's window."""
        window_end = self.created_at_ms + self.resend_within_ms
        return min(window_end, self.deadline_ms) if self.deadline_ms is not None else window_end


def resend_window_s(proposal_max_age_s: float) -> float:
    """How long after signing a call may be re-published: the deployment's proposal window, less a
    margin for clocks and transit (60 s, or a quarter of a short window)."""
    return proposal_max_age_s - min(60.0, proposal_max_age_s / 4)


@dataclass(frozen=True)
class Observed:
    run_id: str
    call_id: str
    observation: Observation
    partition: int
    offset: int
    received_at: float
    proposal_digest: str = ""

    @property
    def is_final(self) -> bool:
        return self.observation.status.code != INTERIM_CODE

    def as_json(self) -> dict[str, Any]:
        return self.observation.model_dump(mode="json")


def deployment_public_keys(settings: Settings) -> list[bytes]:
    """The keys toolgate's records may be signed with: as configured (TOOLGATE_DEPLOYMENT_PUBLIC_KEY,
    several while a rotation is under way), every one runtime.json lists as accepted now (a
    `toolgate up` on this host), and on a host that holds the deployment secret, those of its
    keyset. Read again when a record names a key not among them (integrity.EdgeVerifier)."""
    found = public_keys_of(settings.deployment_public_key)
    if settings.runtime_file.exists():
        runtime = json.loads(settings.runtime_file.read_text())
        found += [bytes.fromhex(public) for public in runtime.get("deployment_public_keys", [])]
    if SecretProvider(settings.secrets_path).has(settings.deployment_secret_ref):
        found += deployment_keys(settings).public_keys()
    return list(dict.fromkeys(found))


def random_hex(n: int) -> str:
    """`n` random bytes in hex, for an id: os.urandom's, as uuid4's, without building a UUID
    (0.5 µs against 2.0; a proposal takes three ids)."""
    return os.urandom(n).hex()


def _current_traceparent(sample_ratio: float) -> str:
    """The agent's current span, if it traces; else a new trace, sampled at `sample_ratio`
    (every stage follows this decision: a call is traced end to end or not at all)."""
    ctx = trace.get_current_span().get_span_context()
    if ctx.is_valid:
        return format_traceparent(ctx.trace_id, ctx.span_id, ctx.trace_flags.sampled)
    return new_traceparent(sampled=random.random() < sample_ratio)


class ToolgateClient:
    def __init__(
        self,
        bootstrap: str,
        prefix: str = "",
        client_id: str = "toolgate-client",
        trace_sample_ratio: float = 1.0,
        *,
        keyring: AgentKeyring | None = None,
        deployment_public_key: bytes | Sequence[bytes] | None = None,
        published_keys: Callable[[], Iterable[bytes]] | None = None,
        verify: bool = True,
        kafka_config: dict[str, str] | None = None,
        compression: str = "lz4",
        proposal_max_age_s: float = PROPOSAL_MAX_AGE_S,
    ) -> None:
        """`keyring`: where agents' private keys are (for `propose(agent_id=...)`);
        `deployment_public_key`: what observations must be signed with, one key or several
        (`verify=False` reads them unchecked, for tools that only count); `published_keys`: where
        to read the deployment's keys again when a record names a key not among them (a rotation);
        `kafka_config`: SASL/TLS settings;
        `compression`: the codec of what it writes to topics only toolgate reads (proposals,
        decisions; settings.compression); `proposal_max_age_s`: the deployment's proposal
        window (settings.proposal_max_age_seconds), which bounds re-publishing."""
        self.bootstrap = bootstrap
        self.resend_within_ms = int(resend_window_s(proposal_max_age_s) * 1000)
        self.topics = Topics(prefix)
        self.trace_sample_ratio = trace_sample_ratio
        self.keyring = keyring
        self.verifier = EdgeVerifier(deployment_public_key, published_keys) if deployment_public_key else None
        self.verify = verify
        self.kafka_config = dict(kafka_config or {})
        self._signers: dict[str, AgentSigner] = {}
        self._producers = Producers(
            {
                **self.kafka_config,
                "bootstrap.servers": bootstrap,
                "client.id": client_id,
                # Not the idempotent producer: toolgate already answers a proposal sent twice as
                # one call, and an idempotent producer's state dies with a broker that forgets
                # it (a fatal error, every later send refused). One request in flight keeps a
                # run's proposals in order through retries.
                "enable.idempotence": False,
                "max.in.flight.requests.per.connection": 1,
                "acks": "all",
                "linger.ms": 5,
                "partitioner": "murmur2_random",  # the Java client's partitioner, as the stages'
            },
            self.topics,
            compression,
        )
        self._errors: list[str] = []
        self._unanswered = Unanswered()
        self._feeds: dict[str, ObservationFeed[Observed]] = {}  # tenant -> its observation feed
        self._feeds_lock = threading.Lock()

    @classmethod
    def from_settings(
        cls, settings: Settings | None = None, client_id: str = "toolgate-client", role: str | None = None
    ) -> ToolgateClient:
        """A client of the deployment `settings` name; on a secured home, connected as `role`'s
        user (toolgate.kafka_security: an agent's `agent_role(agent_id)`, the door's, ...)."""
        s = (settings or load_settings()).require_infrastructure()
        return cls(
            s.kafka_bootstrap,
            s.topic_prefix,
            client_id,
            s.trace_sample_ratio,
            keyring=AgentKeyring(s.agents_dir),
            deployment_public_key=deployment_public_keys(s),
            published_keys=partial(deployment_public_keys, s),
            kafka_config=client_config(s, role),
            compression=s.compression,
            proposal_max_age_s=s.proposal_max_age_seconds,
        )

    def signer(self, agent_id: str) -> AgentSigner:
        """The agent's signer from the keyring (its newest key), loaded once."""
        if agent_id not in self._signers:
            if self.keyring is None:
                raise KeyError(f"no keyring to sign as {agent_id}: pass keyring= or signer=")
            self._signers[agent_id] = self.keyring.signer(agent_id)
        return self._signers[agent_id]

    def connect(self, tenant_id: str | None = None, timeout: float = 10.0) -> None:
        """Make now what a first call would make: the records' codec (its schemas compiled, ~60
        ms here), the producer of proposals with the topic's metadata, and with `tenant_id` that
        tenant's observation feed. Without this the first `propose` and the first `watch` pay
        for them; an agent that connects as it starts pays once, outside any call."""
        codec()
        producer = self._producers.for_topic(self.topics.proposals)
        producer.list_topics(self.topics.proposals, timeout=timeout)
        if tenant_id is not None:
            self._feed(tenant_id)

    # --- proposing -------------------------------------------------------------------------

    def propose(self, tool: str, arguments: dict[str, Any] | str, *, flush: bool = True, **fields: Any) -> Proposed:
        """Publish one proposal, signed as the agent: `prepare` then `publish`, with `prepare`'s
        arguments (`user_id` and `agent_id` or `signer` at least)."""
        return self.publish([self.prepare(tool, arguments, **fields)], flush=flush)[0]

    def prepare(
        self,
        tool: str,
        arguments: dict[str, Any] | str,
        *,
        agent_id: str | None = None,
        user_id: str,
        tenant_id: str | None = None,
        scopes: Sequence[str] | None = None,
        signer: AgentSigner | None = None,
        run_id: str | None = None,
        workflow_id: str | None = None,
        logical_operation_id: str | None = None,
        idempotency_key: str | None = None,
        version: str = "latest",
        deadline_ms: int | None = None,
        dry_run: bool = False,
        repair_attempt: int = 0,
        call_id: str | None = None,
        compensation_of: str | None = None,
        watch: bool = False,
    ) -> Draft:
        """One proposal, to be signed as the agent (`signer`, or `agent_id`'s key from the
        keyring) when it is published. `tenant_id` and `scopes` default to the agent's own;
        asking for another tenant or more scopes than granted is refused by toolgate, not here.
        With `watch`, remember where the tenant's observation topic ends now, so `wait` cannot
        miss the answer however fast it comes (the client's observation feed for that topic
        keeps it for `wait`)."""
        if signer is None:
            signer = self._keyring_signer(agent_id)
        call_id = call_id or f"call_{random_hex(16)}"
        # Answers come back on the agent's own tenant's topic, whatever tenant the call claims.
        start = self._watch(signer.tenant_id, call_id) if watch else ()
        now = int(time.time() * 1000)
        run_id = run_id or f"run_{random_hex(6)}"
        proposal = ToolProposal(
            call_id=call_id,
            tenant_id=tenant_id or signer.tenant_id,
            principal=Principal(
                user_id=user_id, agent_id=signer.agent_id, scopes=list(signer.scopes if scopes is None else scopes)
            ),
            workflow_id=workflow_id or run_id,
            run_id=run_id,
            logical_operation_id=logical_operation_id or f"op_{random_hex(6)}",
            tool_name=tool,
            tool_version=version,
            arguments=arguments if isinstance(arguments, str) else json.dumps(arguments),
            idempotency_key=idempotency_key,
            deadline_ms=deadline_ms,
            repair_attempt=repair_attempt,
            dry_run=dry_run,
            created_at_ms=now,
            compensation_of=compensation_of,
        )
        return Draft(proposal, signer, start)

    def publish(self, drafts: Sequence[Draft], flush: bool = True) -> list[Proposed]:
        """Sign and publish proposals, in order, each as its own record. The proposals of one
        agent key are signed together, up to TREE_MAX under one signature
        (`proposal_signing.sign_all`): an agent that has several calls to make at once pays for
        one signature, and validation checks one, not one a call."""
        trees: dict[tuple[str, str], list[int]] = {}
        for at, draft in enumerate(drafts):
            trees.setdefault((draft.signer.agent_id, draft.signer.key_id), []).append(at)
        signed: dict[int, tuple[ToolProposal, str]] = {}
        for members in trees.values():
            signer = drafts[members[0]].signer
            for start in range(0, len(members), TREE_MAX):
                tree = members[start : start + TREE_MAX]
                signed.update(zip(tree, signer.sign_all([drafts[at].proposal for at in tree]), strict=True))
        proposed = [
            self._send(*signed[at], draft.signer.tenant_id, draft.start_offsets) for at, draft in enumerate(drafts)
        ]
        if flush:
            self.flush()
        return proposed

    def _keyring_signer(self, agent_id: str | None) -> AgentSigner:
        if agent_id is None:
            raise ValueError("propose needs agent_id (a key in the keyring) or signer")
        return self.signer(agent_id)

    def _send(
        self,
        proposal: ToolProposal,
        proposal_digest: str,
        answer_tenant: str,
        start: tuple[tuple[int, int], ...],
    ) -> Proposed:
        """Publish a signed proposal with its edge headers; remember it until it is answered."""
        traceparent = _current_traceparent(self.trace_sample_ratio)
        fingerprint = codec().fingerprint_of(ToolProposal)
        record = Record(
            self.topics.proposals,
            proposal.run_id.encode(),
            codec().encode(proposal),
            tuple(edge_headers(traceparent, proposal.call_id, proposal.tenant_id, fingerprint)),
        )
        proposed = Proposed(
            proposal.call_id,
            proposal.run_id,
            traceparent,
            proposal.created_at_ms,
            start,
            answer_tenant,
            proposal_digest,
            record,
            proposal.deadline_ms,
            self.resend_within_ms,
        )
        # Remembered before it is published: a feed may hear its answer before publish returns.
        self._unanswered.add(proposed, time.monotonic())
        self.publish_raw(record.topic, record.key, record.value, list(record.headers))
        return proposed

    def resend(self, proposed: Proposed) -> None:
        """Publish a proposal again, byte for byte, without waiting for the broker: a resend
        that cannot be delivered is sent again later, so its failure is not an error here."""
        if proposed.record is None:
            raise ValueError(f"{proposed.call_id} was not proposed by this client: nothing to re-publish")
        r = proposed.record
        self.publish_raw(r.topic, r.key, r.value, list(r.headers), on_delivery=_ignore)

    def publish_raw(
        self,
        topic: str,
        key: bytes | None,
        value: bytes,
        headers: list[tuple[str, bytes]] | None = None,
        partition: int | None = None,
        on_delivery: Any = None,
    ) -> None:
        kwargs: dict[str, Any] = {
            "key": key,
            "value": value,
            "headers": headers or [],
            "on_delivery": on_delivery or self._delivered,
        }
        if partition is not None:
            kwargs["partition"] = partition
        producer = self._producers.for_topic(topic)
        while True:
            try:
                producer.produce(topic, **kwargs)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)

    def _delivered(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self._errors.append(str(err))

    def flush(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        remaining = sum(p.flush(max(0.0, deadline - time.monotonic())) for p in self._producers.made())
        if remaining or self._errors:
            errors, self._errors = self._errors, []
            raise RuntimeError(f"{remaining} records undelivered; errors: {errors[:3]}")

    # --- observing -------------------------------------------------------------------------

    def _consumer(self, fetch_wait_ms: int | None = None) -> Consumer:
        wait = {"fetch.wait.max.ms": fetch_wait_ms} if fetch_wait_ms is not None else {}
        return Consumer(
            {
                **self.kafka_config,
                "bootstrap.servers": self.bootstrap,
                "group.id": f"toolgate-observer-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                **wait,
            }
        )

    def _watch(self, tenant_id: str, call_id: str) -> tuple[tuple[int, int], ...]:
        """Have the tenant's observation feed keep what it hears of `call_id` from now on (the
        feed opens, where the topic ends, the first time); where the feed has read to."""
        feed = self._feed(tenant_id)
        feed.watch(call_id)
        return tuple(sorted(feed.positions.items()))

    def _feed(self, tenant_id: str) -> ObservationFeed[Observed]:
        """The tenant's observation feed, opened where its topic ends the first time it is asked for."""
        with self._feeds_lock:
            feed = self._feeds.get(tenant_id)
            if feed is None:
                feed = self._feeds[tenant_id] = self._open_feed(tenant_id)
        return feed

    def _open_feed(self, tenant_id: str) -> ObservationFeed[Observed]:
        consumer = self._consumer(FETCH_WAIT_MS)
        topic = self.topics.name("observations", tenant_id)
        try:
            start = {
                p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10.0)[1]
                for p in self._partitions(consumer, topic)
            }
        except BaseException:
            consumer.close()
            raise
        return ObservationFeed(consumer, topic, start, self._hear, also_read=self._unanswered.__contains__)

    def _hear(self, record: Consumed) -> Observed | None:
        """On a feed's thread: the observation a record carries, if genuine; the resend
        schedule hears of it."""
        seen = self._observed(record, None, None)
        if seen is not None:
            self._unanswered.heard(seen, time.monotonic())
        return seen

    def _partitions(self, consumer: Consumer, topic: str) -> list[int]:
        meta = consumer.list_topics(topic, timeout=10.0).topics[topic]
        if meta.error is not None:
            raise LookupError(f"topic {topic}: {meta.error.str()}; is the tenant registered?")
        return sorted(meta.partitions)

    def _end_offsets(self, tenant_id: str) -> tuple[tuple[int, int], ...]:
        consumer = self._consumer()
        try:
            topic = self.topics.name("observations", tenant_id)
            # High watermarks can under-count on Tansu: starting early only re-reads a little.
            return tuple(
                (p, consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10.0)[1])
                for p in self._partitions(consumer, topic)
            )
        finally:
            consumer.close()

    def genuine(self, record: Consumed) -> bool:
        """Whether a record on a tenant's edge topic carries the deployment's signature (a record
        whose headers could not be read carries none: topics/consumed.py)."""
        if not self.verify:
            return True
        if self.verifier is None:
            raise RuntimeError(
                "cannot verify toolgate's records: no deployment public key "
                "(set TOOLGATE_DEPLOYMENT_PUBLIC_KEY, or pass verify=False to read them unchecked)"
            )
        return self.verifier.ok(record.topic, record.key, record.headers, record.value or b"")

    def observations(
        self,
        *,
        tenant_id: str,
        run_id: str | None = None,
        call_ids: Iterable[str] | None = None,
        follow: bool = False,
        idle_timeout: float = 2.0,
        start_offsets: Sequence[tuple[int, int]] = (),
        timeout: float | None = None,
    ) -> Iterator[Observed]:
        """A tenant's observations in arrival order, filtered by run and calls; a record without
        the deployment's signature is skipped. Without `follow`, stops once nothing new
        arrived for `idle_timeout` seconds; with it, after `timeout` (if set)."""
        wanted = set(call_ids) if call_ids is not None else None
        consumer = self._assigned(tenant_id, start_offsets)
        stop_at = time.monotonic() + timeout if timeout is not None else float("inf")
        try:
            last = time.monotonic()
            while (follow or time.monotonic() - last < idle_timeout) and time.monotonic() < stop_at:
                msg = consumer.poll(0.2)
                if msg is None or msg.error():
                    continue
                last = time.monotonic()
                record = _readable(read(msg), "observations")
                seen = self._observed(record, run_id, wanted) if record is not None else None
                if seen is not None:
                    yield seen
        finally:
            consumer.close()

    def latest_of(self, tenant_id: str, call_id: str, since_ms: int, within_s: float) -> Observed | None:
        """A call's final observation on its tenant's topic, else its latest interim one, looking
        only from `since_ms` (when the call was registered: the broker finds where that is, where
        it can) and for at most `within_s` seconds, however busy the topic: a bounded scan."""
        consumer = self._consumer()
        topic = self.topics.name("observations", tenant_id)
        stop_at = time.monotonic() + within_s
        latest: Observed | None = None
        try:
            asked = [TopicPartition(topic, p, since_ms) for p in self._partitions(consumer, topic)]
            found = consumer.offsets_for_times(asked, timeout=min(within_s, 5.0))
            # -1: nothing at or after that time in the partition; an error: read it from its start.
            starts = [tp if tp.error is None else TopicPartition(topic, tp.partition, OFFSET_BEGINNING) for tp in found]
            reading = [tp for tp in starts if tp.offset != -1]
            if not reading:
                return None
            consumer.assign(reading)
            heard = 0.0  # when the last record came (0: none yet, so no idle end before the first)
            while time.monotonic() < stop_at and (not heard or time.monotonic() - heard < IDLE_S):
                msg = consumer.poll(0.1)
                if msg is None or msg.error():
                    continue
                heard = time.monotonic()
                record = _readable(read(msg), "observations")
                seen = self._observed(record, None, {call_id}) if record is not None else None
                if seen is not None:
                    latest = seen
                    if seen.is_final:
                        return seen
        finally:
            consumer.close()
        return latest

    def _assigned(self, tenant_id: str, start_offsets: Sequence[tuple[int, int]]) -> Consumer:
        """A consumer of the tenant's observation topic from `start_offsets` (else its start).
        An offset past the end, as after a broker that came back empty, resets to the start."""
        consumer = self._consumer()
        topic = self.topics.name("observations", tenant_id)
        starts = dict(start_offsets)
        consumer.assign(
            [TopicPartition(topic, p, starts.get(p, OFFSET_BEGINNING)) for p in self._partitions(consumer, topic)]
        )
        return consumer

    def _observed(self, record: Consumed, run_id: str | None, wanted: set[str] | None) -> Observed | None:
        """The observation a record carries, if it is toolgate's and one that was asked for."""
        key = (record.key or b"").decode("utf-8", "replace")
        cid = header(record.headers, CALL_ID) or ""
        if (run_id and key != run_id) or (wanted is not None and cid not in wanted) or not self.genuine(record):
            return None
        try:
            observation = codec().decode(record.value or b"", Observation)
        except DecodeError:
            return None
        proposal_digest = header(record.headers, PROPOSAL_DIGEST) or ""
        return Observed(key, cid, observation, record.partition, record.offset, time.time(), proposal_digest)

    def wait(self, proposed: Proposed, timeout: float = 60.0, final: bool = True, resend: bool = True) -> Observed:
        """The observation of one proposed call (its final one unless `final` is False): signed
        by the deployment and naming the digest of exactly what was proposed.

        With `resend`, a call with no final answer after RESEND_FIRST_S is re-published (module
        docstring), and with it every other call of this client still unanswered and due:
        what lost one call (a broker that came back empty) lost its neighbours too, and an
        agent that waits for its calls one by one should not pay the wait once per call."""
        feed = self._feeds.get(proposed.tenant_id)
        if feed is None or not feed.watches(proposed.call_id):
            return self._wait_reading(proposed, time.monotonic() + timeout, final, resend)
        unanswered = self._unanswered
        stop_at = time.monotonic() + timeout

        def wanted(seen: Observed) -> bool:
            return seen.proposal_digest == proposed.proposal_digest and (seen.is_final or not final)

        while (now := time.monotonic()) < stop_at:
            if resend and unanswered.due(proposed.call_id, now):
                for again in unanswered.take_due(now):
                    self.resend(again)
            seen = feed.take(proposed.call_id, wanted, min(RESEND_CHECK_S, stop_at - now))
            if seen is not None:
                if seen.is_final:
                    feed.forget(proposed.call_id)
                return seen
            if not feed.watches(proposed.call_id):  # forgotten: the feed held too many calls
                return self._wait_reading(proposed, stop_at, final, resend)
        raise TimeoutError(f"no observation for {proposed.call_id} within {timeout}s")

    def _wait_reading(self, proposed: Proposed, stop_at: float, final: bool, resend: bool) -> Observed:
        """`wait` for a call no feed of this client holds: read the topic from where it ended
        when the call was proposed (else from its start) with a consumer of its own."""
        consumer = self._assigned(proposed.tenant_id, proposed.start_offsets)
        unanswered = self._unanswered
        try:
            while (now := time.monotonic()) < stop_at:
                if resend and unanswered.due(proposed.call_id, now):
                    for again in unanswered.take_due(now):
                        self.resend(again)
                msg = consumer.poll(0.2)
                if msg is None or msg.error() or (record := _readable(read(msg), "wait")) is None:
                    continue
                cid = header(record.headers, CALL_ID) or ""
                if cid != proposed.call_id and cid not in unanswered:
                    continue
                seen = self._observed(record, None, None)
                if seen is None:
                    continue
                unanswered.heard(seen, time.monotonic())
                if seen.call_id != proposed.call_id or seen.proposal_digest != proposed.proposal_digest:
                    continue  # another call's, or an answer to another proposal that reused this call_id
                if seen.is_final or not final:
                    return seen
        finally:
            consumer.close()
        raise TimeoutError(f"no observation for {proposed.call_id} by the deadline")

    def close(self) -> None:
        with self._feeds_lock:
            feeds, self._feeds = list(self._feeds.values()), {}
        for feed in feeds:
            feed.close()
        for producer in self._producers.made():
            producer.flush(10.0)
        del self._producers


PRUNE_FIRST = 1024  # waiting calls at which the client first looks for calls past their window


class Unanswered:
    """The calls a client proposed that have no final answer yet, each with when it is due to
    be re-published: RESEND_FIRST_S after it was sent, then twice as long each time up to
    RESEND_MAX_S; only every RESEND_MAX_S once toolgate said it holds the call for approval.
    A call leaves when its final answer is heard, or once past `resend_until_ms` (never
    re-published past its deadline or its signature's window)."""

    def __init__(self) -> None:
        self._calls: dict[str, tuple[Proposed, float, float]] = {}  # call_id -> (proposed, due at, interval)
        self._lock = threading.Lock()  # observation feeds tell it what they hear on their threads
        self._prune_at = PRUNE_FIRST

    def add(self, proposed: Proposed, now: float) -> None:
        if proposed.record is None:
            return
        with self._lock:
            self._add(proposed, now)

    def _add(self, proposed: Proposed, now: float) -> None:
        self._calls[proposed.call_id] = (proposed, now + RESEND_FIRST_S, RESEND_FIRST_S)
        if len(self._calls) >= self._prune_at:  # calls nobody waits for do not pile up
            wall_ms = time.time() * 1000
            for call_id in [c for c, (p, _, _) in self._calls.items() if wall_ms >= p.resend_until_ms()]:
                del self._calls[call_id]
            # The next look once as many calls again are waiting: a look costs each add O(1), not
            # a pass over every waiting call per 1,024 adds (at 100,000 calls in flight, 5 million).
            self._prune_at = max(PRUNE_FIRST, 2 * len(self._calls))

    def __contains__(self, call_id: object) -> bool:
        return call_id in self._calls

    def due(self, call_id: str, now: float) -> bool:
        entry = self._calls.get(call_id)
        return entry is not None and entry[1] <= now

    def heard(self, seen: Observed, now: float) -> None:
        with self._lock:
            self._heard(seen, now)

    def _heard(self, seen: Observed, now: float) -> None:
        entry = self._calls.get(seen.call_id)
        if entry is None or seen.proposal_digest != entry[0].proposal_digest:
            return
        if seen.is_final:
            del self._calls[seen.call_id]
        else:
            self._calls[seen.call_id] = (entry[0], max(entry[1], now + RESEND_MAX_S), RESEND_MAX_S)

    def take_due(self, now: float) -> list[Proposed]:
        """The calls due now, rescheduled; calls past their window are forgotten."""
        wall_ms = time.time() * 1000
        due = []
        with self._lock:
            for call_id, (proposed, at, interval) in list(self._calls.items()):
                if wall_ms >= proposed.resend_until_ms():
                    del self._calls[call_id]
                elif at <= now:
                    due.append(proposed)
                    longer = min(interval * 2, RESEND_MAX_S)
                    self._calls[call_id] = (proposed, now + longer, longer)
        return due


def _ignore(err: KafkaError | None, msg: Message) -> None:
    """A resend's delivery report: a resend that failed is sent again at the next one."""


def _readable(record: Consumed | Unreadable, reader: str) -> Consumed | None:
    """A record read (topics/consumed.py), or None, said, for one that cannot be: it carries no
    signature that could be checked, so it is none of toolgate's answers or packets."""
    if isinstance(record, Unreadable):
        skipped(log, record, reader)
        return None
    return record


class ApprovalClient(ToolgateClient):
    """For approval services: read confirmation packets, publish signed decisions."""

    def requests(
        self,
        tenants: Iterable[str],
        *,
        follow: bool = False,
        idle_timeout: float = 2.0,
        stop: threading.Event | None = None,
    ) -> Iterator[tuple[ApprovalRequest, str]]:
        """Confirmation packets of the given tenants, each signed by the deployment (a packet
        without that signature is skipped: an approver must only ever see what toolgate holds).
        Following, it ends when `stop` is set, even while no packet arrives."""
        consumer = self._consumer()
        assigned = []
        for tenant in tenants:
            topic = self.topics.name("approvals_requested", tenant)
            assigned += [TopicPartition(topic, p, OFFSET_BEGINNING) for p in self._partitions(consumer, topic)]
        consumer.assign(assigned)
        try:
            last = time.monotonic()
            while (follow or time.monotonic() - last < idle_timeout) and not (stop and stop.is_set()):
                msg = consumer.poll(0.2)
                if msg is None or msg.error():
                    continue
                last = time.monotonic()
                record = _readable(read(msg), "approval requests")
                if record is None or not self.genuine(record):
                    continue
                try:
                    packet = codec().decode(record.value or b"", ApprovalRequest)
                except DecodeError:
                    continue
                yield packet, header(record.headers, TRACEPARENT) or ""
        finally:
            consumer.close()

    def decide(
        self,
        packet: ApprovalRequest,
        *,
        approver_id: str,
        key: Ed25519PrivateKey,
        approve: bool,
        reason: str | None = None,
        valid_for_s: int = 300,
        traceparent: str | None = None,
        decision_id: str | None = None,
    ) -> ApprovalDecision:
        """Sign and publish a decision on `packet`; raises toolgate.signing.PacketMismatch (and
        signs nothing) when the packet's payload hash is not that of the arguments it shows."""
        from toolgate.signing import check_packet

        check_packet(packet)
        now = int(time.time() * 1000)
        decision = sign(
            ApprovalDecision(
                decision_id=decision_id or f"dec_{random_hex(16)}",
                approval_id=packet.approval_id,
                decision=Verdict.APPROVE if approve else Verdict.DENY,
                approver_id=approver_id,
                tool_name=packet.tool_name,
                tool_version=packet.tool_version,
                payload_hash=packet.payload_hash,
                reason=reason,
                decided_at_ms=now,
                expires_at_ms=now + valid_for_s * 1000,
                state_version=packet.state_version,
                signature=b"",
            ),
            key,
        )
        self.publish_decision(decision, packet, traceparent)
        return decision

    def publish_decision(
        self, decision: ApprovalDecision, packet: ApprovalRequest, traceparent: str | None = None
    ) -> None:
        c = codec()
        headers = edge_headers(
            traceparent or new_traceparent(), packet.call_id, packet.tenant_id, c.fingerprint_of(ApprovalDecision)
        )
        self.publish_raw(self.topics.approvals_decisions, decision.approval_id.encode(), c.encode(decision), headers)
        self.flush()
