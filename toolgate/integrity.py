"""What a stage decided is proven by its MAC; what toolgate answers, by its signature.

One deployment secret (a secret reference, `TOOLGATE_DEPLOYMENT_SECRET_REF`; `toolgate up`
generates one) is the root of two things, each derived with HKDF-SHA-256 under its own label:

* **Stage MACs.** Every record written to an internal topic (validated, authorized,
  executable, results) and every dead letter carries `toolgate-mac`, an HMAC-SHA-256 over
  its exact value bytes under a key derived for that (physical) topic. A consumer checks it
  before it decodes anything; a record that fails was not written by a toolgate stage and is
  dead-lettered, audited and never acted on. A key per topic means a batch that is genuine on
  tool.validated is still a forgery on tool.executable.
* **The deployment's Ed25519 key.** Records on the per-tenant edge topics that clients read
  (observations, confirmation packets) carry `toolgate-signature` over the topic, key,
  call_id, the proposal digest and the value; clients verify it with the deployment's public
  key (`TOOLGATE_DEPLOYMENT_PUBLIC_KEY`, or `runtime.json` under `toolgate up`).

Sealing happens where records are produced (a stage's flush, the outbox relay, `dlq replay`),
so no code path can forget it.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Sequence
from functools import cached_property

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from toolgate.ed25519 import PrivateKey, PublicKey
from toolgate.secrets import SecretProvider
from toolgate.settings import Settings
from toolgate.topics.catalog import Topics
from toolgate.topics.headers import CALL_ID, PROPOSAL_DIGEST, Headers, header

MAC_HEADER = "toolgate-mac"
SIGNATURE_HEADER = "toolgate-signature"
MACED = frozenset({"validated", "authorized", "executable", "results", "deadletter"})
SIGNED = frozenset({"observations", "approvals_requested"})
EDGE_PURPOSE = b"toolgate.edge.v1"


def derive(secret: bytes, label: str) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=label.encode()).derive(secret)


def edge_signed_bytes(
    topic: str, key: bytes | None, headers: Sequence[tuple[str, bytes | None]], value: bytes
) -> bytes:
    """What the deployment signs on a client-facing record: length-prefixed fields, so no two
    different records can produce the same bytes."""
    fields = [
        EDGE_PURPOSE,
        topic.encode(),
        key or b"",
        (header(headers, CALL_ID) or "").encode(),
        (header(headers, PROPOSAL_DIGEST) or "").encode(),
        hashlib.sha256(value).digest(),
    ]
    return b"".join(len(f).to_bytes(4, "big") + f for f in fields)


class DeploymentKeys:
    """The keys one deployment secret yields. Holding it is what makes a process a stage."""

    def __init__(self, secret: bytes) -> None:
        if len(secret) < 16:
            raise ValueError("the deployment secret must be at least 16 bytes")
        self._secret = secret
        self._mac_keys: dict[str, bytes] = {}

    @classmethod
    def load(cls, secrets: SecretProvider, ref: str) -> DeploymentKeys:
        return cls(secrets.resolve(ref).encode())

    def mac(self, topic: str, value: bytes) -> bytes:
        key = self._mac_keys.get(topic)
        if key is None:
            key = self._mac_keys[topic] = derive(self._secret, f"toolgate stage mac v1 {topic}")
        return hmac.new(key, value, hashlib.sha256).digest()

    def mac_ok(self, topic: str, value: bytes, mac: bytes | None) -> bool:
        return mac is not None and hmac.compare_digest(self.mac(topic, value), mac)

    @cached_property
    def signing_key(self) -> PrivateKey:
        return PrivateKey(derive(self._secret, "toolgate deployment signing v1"))

    @cached_property
    def public_key(self) -> bytes:
        return self.signing_key.public.raw


def deployment_keys(settings: Settings) -> DeploymentKeys:
    """The deployment's keys, from its secret reference (fails loudly if it resolves to nothing)."""
    return DeploymentKeys.load(SecretProvider(settings.secrets_path), settings.deployment_secret_ref)


def raw_header(headers: Iterable[tuple[str, bytes | None]] | None, name: str) -> bytes | None:
    for key, value in headers or ():
        if key == name:
            return value
    return None


class Sealer:
    """Adds the MAC or signature a record's topic calls for, and checks MACs on the way in."""

    def __init__(self, keys: DeploymentKeys, topics: Topics) -> None:
        self.keys = keys
        self.topics = topics

    def seal(self, topic: str, key: bytes | None, value: bytes, headers: Headers) -> Headers:
        """`headers` with this record's MAC or signature added (`topic` is physical)."""
        kind = self.topics.parse(topic)[0]
        headers = [(k, v) for k, v in headers if k not in (MAC_HEADER, SIGNATURE_HEADER)]
        if kind in MACED:
            return [*headers, (MAC_HEADER, self.keys.mac(topic, value))]
        if kind in SIGNED:
            signature = self.keys.signing_key.sign(edge_signed_bytes(topic, key, headers, value))
            return [*headers, (SIGNATURE_HEADER, signature)]
        return headers

    def mac_ok(self, topic: str, value: bytes, headers: Iterable[tuple[str, bytes | None]] | None) -> bool:
        return self.keys.mac_ok(topic, value, raw_header(headers, MAC_HEADER))


class EdgeVerifier:
    """A client's check that a record on a tenant's edge topic was written by toolgate."""

    def __init__(self, public_key: bytes) -> None:
        self._key = PublicKey(public_key)

    def ok(self, topic: str, key: bytes | None, headers: Sequence[tuple[str, bytes | None]], value: bytes) -> bool:
        signature = raw_header(headers, SIGNATURE_HEADER)
        return self._key.ok(signature, edge_signed_bytes(topic, key, headers, value))
