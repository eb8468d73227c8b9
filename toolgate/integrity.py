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

A record that leaves alone is signed over those fields (`edge_signed_bytes`). Records that leave
together for one topic (a round's observations for a tenant) are signed once, under one Merkle
root (`toolgate.merkle`; the root under the purpose `toolgate.edge.root.v1`): each record carries
the signature and, in `toolgate-proof`, the path from its leaf to the root. A signature costs
~25 µs to make and ~40 to check, a path of a 500-record round 9 SHA-256s, and a client checks a
root's signature once for all the records under it. Trees never mix topics, so a path shows a
tenant hashes of its own records only.

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
from toolgate.merkle import CheckedRoots, leaf_hash, length_prefixed, merkle_tree, root_of, signed_root
from toolgate.secrets import SecretProvider
from toolgate.settings import Settings
from toolgate.topics.catalog import Topics
from toolgate.topics.headers import CALL_ID, PROPOSAL_DIGEST, Headers, header

MAC_HEADER = "toolgate-mac"
SIGNATURE_HEADER = "toolgate-signature"
PROOF_HEADER = "toolgate-proof"
MACED = frozenset({"validated", "authorized", "executable", "results", "deadletter"})
SIGNED = frozenset({"observations", "approvals_requested"})
EDGE_PURPOSE = b"toolgate.edge.v1"
ROOT_PURPOSE = b"toolgate.edge.root.v1"


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
    return length_prefixed(fields)


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
        return hmac.new(self._mac_key(topic), value, hashlib.sha256).digest()

    def _mac_key(self, topic: str) -> bytes:
        key = self._mac_keys.get(topic)
        if key is None:
            key = self._mac_keys[topic] = derive(self._secret, f"toolgate stage mac v1 {topic}")
        return key

    def mac_ok(self, topic: str, value: bytes, mac: bytes | None) -> bool:
        return mac is not None and hmac.compare_digest(self.mac(topic, value), mac)

    def derive_macs(self, topics: Iterable[str]) -> None:
        """Derive the MAC keys of `topics` now, not as their first records pass."""
        for topic in topics:
            self._mac_key(topic)

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
        return self.seal_all([(topic, key, value, headers)])[0]

    def seal_all(self, records: Sequence[tuple[str, bytes | None, bytes, Headers]]) -> list[Headers]:
        """Each record's headers with its MAC or signature added; the records of one signed topic
        share one signature over their tree's root (a topic with one record: over the record)."""
        sealed: list[Headers] = []
        signed: dict[str, list[tuple[int, bytes]]] = {}
        for topic, key, value, headers in records:
            kind = self.topics.parse(topic)[0]
            headers = [(k, v) for k, v in headers if k not in (MAC_HEADER, SIGNATURE_HEADER, PROOF_HEADER)]
            if kind in MACED:
                headers.append((MAC_HEADER, self.keys.mac(topic, value)))
            elif kind in SIGNED:
                signed.setdefault(topic, []).append((len(sealed), edge_signed_bytes(topic, key, headers, value)))
            sealed.append(headers)
        sign = self.keys.signing_key.sign
        for members in signed.values():
            if len(members) == 1:
                at, message = members[0]
                sealed[at].append((SIGNATURE_HEADER, sign(message)))
                continue
            root, proofs = merkle_tree([leaf_hash(message) for _, message in members])
            signature = sign(signed_root(ROOT_PURPOSE, root))
            for (at, _), proof in zip(members, proofs, strict=True):
                sealed[at] += [(SIGNATURE_HEADER, signature), (PROOF_HEADER, proof)]
        return sealed

    def mac_ok(self, topic: str, value: bytes, headers: Iterable[tuple[str, bytes | None]] | None) -> bool:
        return self.keys.mac_ok(topic, value, raw_header(headers, MAC_HEADER))

    def prepare(self, topics: Iterable[str]) -> None:
        """The keys for sealing and checking records of `topics` (physical names), made now: the
        MAC keys of those MACed, the deployment's signing key if any is signed."""
        kinds = {topic: self.topics.parse(topic)[0] for topic in topics}
        self.keys.derive_macs(topic for topic, kind in kinds.items() if kind in MACED)
        if any(kind in SIGNED for kind in kinds.values()):
            _ = self.keys.signing_key


class EdgeVerifier:
    """A client's check that a record on a tenant's edge topic was written by toolgate."""

    def __init__(self, public_key: bytes) -> None:
        self._key = PublicKey(public_key)
        self._roots = CheckedRoots(ROOT_PURPOSE)

    def ok(self, topic: str, key: bytes | None, headers: Sequence[tuple[str, bytes | None]], value: bytes) -> bool:
        signature = raw_header(headers, SIGNATURE_HEADER)
        message = edge_signed_bytes(topic, key, headers, value)
        proof = raw_header(headers, PROOF_HEADER)
        if proof is None:
            return self._key.ok(signature, message)
        root = root_of(leaf_hash(message), proof)
        return root is not None and self._roots.ok(self._key, signature, root)
