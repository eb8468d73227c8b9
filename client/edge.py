"""A client's connection to toolgate's edge topics: its producers, its consumers, and the check
that a record is the deployment's (toolgate.client). The agents' client (`agent.py`) and the
approval services' (`approvals.py`) are built on it."""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Any, Self

from confluent_kafka import Consumer, KafkaError, KafkaException, Message

from toolgate.client.calls import PROPOSAL_MAX_AGE_S, Observed, resend_window_s
from toolgate.client.feed import ObservationFeed
from toolgate.client.resend import Unanswered
from toolgate.kafka_security import client_config
from toolgate.secrets import SecretProvider
from toolgate.settings import Settings, load_settings
from toolgate.topics.catalog import Topics
from toolgate.topics.consumed import Consumed, Unreadable, skipped
from toolgate.topics.ends import READER_SETTINGS
from toolgate.topics.producers import Producers, Record, enqueue
from toolgate.trust.agent_keys import AgentKeyring, AgentSigner
from toolgate.trust.deployment_keys import deployment_keys, public_keys_of
from toolgate.trust.integrity import EdgeVerifier

log = logging.getLogger("toolgate.client")


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


class Edge:
    """What both clients share: the producers (one per codec), consumers of the edge topics, the
    calls awaiting an answer and the feeds that hear them, and the deployment's keys."""

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
    ) -> Self:
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

    def publish_raw(
        self,
        topic: str,
        key: bytes | None,
        value: bytes,
        headers: list[tuple[str, bytes]] | None = None,
        partition: int | None = None,
        on_delivery: Any = None,
    ) -> None:
        self.publish_record(Record(topic, key, value, headers or [], partition), on_delivery)

    def publish_record(self, record: Record, on_delivery: Any = None) -> None:
        """Hand `record` to its producer (topics/producers.py). A record refused before it was
        queued (too large, an unknown topic) raises KafkaException; one the broker did not
        acknowledge is raised by the next `flush`."""
        producer = self._producers.for_topic(record.topic)
        while True:
            try:
                refused = enqueue(producer, record, on_delivery or self._delivered)
                break
            except BufferError:
                producer.poll(0.05)
        if refused is not None:
            raise KafkaException(refused)
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

    def _consumer(self, fetch_wait_ms: int | None = None, eof: bool = False) -> Consumer:
        """A consumer of this edge's topics (`eof`: one that tells each partition's end as it
        reaches it, and whose fetch that finds nothing is answered at once: topics/ends.py)."""
        wait = {"fetch.wait.max.ms": fetch_wait_ms} if fetch_wait_ms is not None else {}
        ends = READER_SETTINGS if eof else {}
        return Consumer(
            {
                **self.kafka_config,
                "bootstrap.servers": self.bootstrap,
                "group.id": f"toolgate-observer-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                **wait,
                **ends,
            }
        )

    def _partitions(self, consumer: Consumer, topic: str) -> list[int]:
        meta = consumer.list_topics(topic, timeout=10.0).topics[topic]
        if meta.error is not None:
            raise LookupError(f"topic {topic}: {meta.error.str()}; is the tenant registered?")
        return sorted(meta.partitions)

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

    def close(self) -> None:
        with self._feeds_lock:
            feeds, self._feeds = list(self._feeds.values()), {}
        for feed in feeds:
            feed.close()
        for producer in self._producers.made():
            producer.flush(10.0)
        del self._producers


def ignore_delivery(err: KafkaError | None, msg: Message) -> None:
    """A resend's delivery report: a resend that failed is sent again at the next one."""


def readable(record: Consumed | Unreadable, reader: str) -> Consumed | None:
    """A record read (topics/consumed.py), or None, said, for one that cannot be: it carries no
    signature that could be checked, so it is none of toolgate's answers or packets."""
    if isinstance(record, Unreadable):
        skipped(log, record, reader)
        return None
    return record
