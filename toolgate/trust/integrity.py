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
root (`toolgate.trust.merkle`; the root under the purpose `toolgate.edge.root.v1`): each record carries
the signature and, in `toolgate-proof`, the path from its leaf to the root. A signature costs
far more to make and to check than a hash (docs/performance.md, "Figures behind the code"), a
path of a 500-record round 9 SHA-256s, and a client checks a root's signature once for all the
records under it. Trees never mix topics, so a path shows a tenant hashes of its own records only.

Sealing happens where records are produced (a stage's flush, the outbox relay, `dlq replay`),
so no code path can forget it.

**Key ids.** The secret reference holds a keyset (toolgate.trust.keyset), so the secret can be rotated
while everything runs. Every MAC and signature goes with `toolgate-key-id`, the id of the key
that made it (toolgate.trust.deployment_keys), and is checked with that key only, if it is one this
process accepts now: the key that seals, a staged next key, or the previous one during its grace
window. Clients hold the deployment's public keys by id the same way.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence

from toolgate.topics.catalog import Topics
from toolgate.topics.headers import CALL_ID, PROPOSAL_DIGEST, Headers, header
from toolgate.trust.deployment_keys import DeploymentKeys as DeploymentKeys
from toolgate.trust.deployment_keys import KeySource, key_id_of
from toolgate.trust.deployment_keys import deployment_keys as deployment_keys
from toolgate.trust.deployment_keys import derive as derive
from toolgate.trust.ed25519 import PublicKey
from toolgate.trust.merkle import CheckedRoots, leaf_hash, length_prefixed, merkle_tree, root_of, signed_root

log = logging.getLogger("toolgate.keys")

MAC_HEADER = "toolgate-mac"
SIGNATURE_HEADER = "toolgate-signature"
PROOF_HEADER = "toolgate-proof"
KEY_HEADER = "toolgate-key-id"  # the id of the key a record's MAC or signature was made with
SEALS = (MAC_HEADER, SIGNATURE_HEADER, PROOF_HEADER, KEY_HEADER)
KEY_ID_MAX = 64  # a longer key id names no key: it is not looked up
RELOAD_EVERY_S = 1.0  # a client reads its keys again for an unknown key id at most this often
MACED = frozenset({"validated", "authorized", "executable", "results", "deadletter"})
SIGNED = frozenset({"observations", "approvals_requested"})
EDGE_PURPOSE = b"toolgate.edge.v1"
ROOT_PURPOSE = b"toolgate.edge.root.v1"


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


def raw_header(headers: Iterable[tuple[str, bytes | None]] | None, name: str) -> bytes | None:
    for key, value in headers or ():
        if key == name:
            return value
    return None


class Sealer:
    """Adds the MAC or signature a record's topic calls for, and checks MACs on the way in.

    It seals with the key that seals now and names it (`toolgate-key-id`); it checks a MAC with
    the key the record names, if that key is accepted now. A record that names no key (written
    before keys had ids) is checked with each key accepted now, the sealing key first: a
    stripped id gains a forger nothing, since every one of those keys is a stage's."""

    def __init__(self, keys: KeySource, topics: Topics) -> None:
        self.keys = keys
        self.topics = topics

    def seal(self, topic: str, key: bytes | None, value: bytes, headers: Headers) -> Headers:
        """`headers` with this record's MAC or signature added (`topic` is physical)."""
        return self.seal_all([(topic, key, value, headers)])[0]

    def seal_all(self, records: Sequence[tuple[str, bytes | None, bytes, Headers]]) -> list[Headers]:
        """Each record's headers with its MAC or signature added; the records of one signed topic
        share one signature over their tree's root (a topic with one record: over the record)."""
        keys = self.keys.view().sealing
        named = (KEY_HEADER, keys.key_id.encode())
        sealed: list[Headers] = []
        signed: dict[str, list[tuple[int, bytes]]] = {}
        for topic, key, value, headers in records:
            kind = self.topics.parse(topic)[0]
            headers = [(k, v) for k, v in headers if k not in SEALS]
            if kind in MACED:
                headers += [(MAC_HEADER, keys.mac(topic, value)), named]
            elif kind in SIGNED:
                headers.append(named)
                signed.setdefault(topic, []).append((len(sealed), edge_signed_bytes(topic, key, headers, value)))
            sealed.append(headers)
        sign = keys.signing_key.sign
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
        pairs = headers if isinstance(headers, Sequence) else list(headers or ())
        mac = raw_header(pairs, MAC_HEADER)
        if mac is None:
            return False
        return any(keys.mac_ok(topic, value, mac) for keys in self._accepted(raw_header(pairs, KEY_HEADER)))

    def mac_keys(self, topic: str, value: bytes, headers: Iterable[tuple[str, bytes | None]] | None) -> frozenset[str]:
        """The ids of the keys accepted now whose MAC the record carries (none: not genuine now).
        A record stays genuine for as long as one of them is accepted: a reader that keeps these
        need not keep the record to check it again after a rotation."""
        pairs = headers if isinstance(headers, Sequence) else list(headers or ())
        mac = raw_header(pairs, MAC_HEADER)
        if mac is None:
            return frozenset()
        candidates = self._accepted(raw_header(pairs, KEY_HEADER))
        return frozenset(keys.key_id for keys in candidates if keys.mac_ok(topic, value, mac))

    def _accepted(self, named: bytes | None) -> Sequence[DeploymentKeys]:
        """The keys to check a record with: the one it names, if accepted; every accepted one if
        it names none."""
        view = self.keys.view()
        if named is None:
            return [view.sealing, *(k for k in view.accepted.values() if k is not view.sealing)]
        if len(named) > KEY_ID_MAX:
            return []
        key_id = named.decode("ascii", "replace")
        keys = view.accepted.get(key_id) or self.keys.learn(key_id).accepted.get(key_id)
        return [keys] if keys is not None else []

    def prepare(self, topics: Iterable[str]) -> None:
        """The keys for sealing and checking records of `topics` (physical names), made now: the
        MAC keys of those MACed, the deployment's signing key if any is signed."""
        kinds = {topic: self.topics.parse(topic)[0] for topic in topics}
        for keys in self.keys.view().accepted.values():
            keys.derive_macs(topic for topic, kind in kinds.items() if kind in MACED)
            if any(kind in SIGNED for kind in kinds.values()):
                _ = keys.signing_key


class EdgeVerifier:
    """A client's check that a record on a tenant's edge topic was written by toolgate: signed by
    one of the deployment's public keys, the one the record names (`toolgate-key-id`).

    `reload`, if given, says where the deployment publishes its keys (runtime.json, the
    environment): a record naming a key the verifier does not hold reads them again (at most
    once a second), so a client learns a new key without a restart. A record that names no key
    is checked with each key held."""

    def __init__(
        self, public_keys: bytes | Iterable[bytes], reload: Callable[[], Iterable[bytes]] | None = None
    ) -> None:
        self._keys = _by_id([public_keys] if isinstance(public_keys, bytes) else public_keys)
        self._reload = reload
        self._reloaded_at = -RELOAD_EVERY_S
        self._lock = threading.Lock()
        self._roots = CheckedRoots(ROOT_PURPOSE)

    @property
    def key_ids(self) -> list[str]:
        return list(self._keys)

    def ok(self, topic: str, key: bytes | None, headers: Sequence[tuple[str, bytes | None]], value: bytes) -> bool:
        signature = raw_header(headers, SIGNATURE_HEADER)
        keys = self._candidates(raw_header(headers, KEY_HEADER))
        message = edge_signed_bytes(topic, key, headers, value)
        proof = raw_header(headers, PROOF_HEADER)
        if proof is None:
            return any(public.ok(signature, message) for public in keys)
        root = root_of(leaf_hash(message), proof)
        return root is not None and any(self._roots.ok(public, signature, root) for public in keys)

    def _candidates(self, named: bytes | None) -> list[PublicKey]:
        if named is None:
            return list(self._keys.values())
        if len(named) > KEY_ID_MAX:
            return []
        key_id = named.decode("ascii", "replace")
        found = self._keys.get(key_id)
        if found is None and self._reload is not None:
            self._learn(key_id)
            found = self._keys.get(key_id)
        return [found] if found is not None else []

    def _learn(self, key_id: str) -> None:
        with self._lock:
            if key_id in self._keys or time.monotonic() - self._reloaded_at < RELOAD_EVERY_S:
                return
            self._reloaded_at = time.monotonic()
            assert self._reload is not None
            try:
                self._keys = {**self._keys, **_by_id(self._reload())}
            except Exception as exc:  # where keys are published may be half-written: the next try
                log.warning("the deployment's public keys could not be read: %r", exc, extra={"action": "keys_unread"})
                return
        if key_id not in self._keys:
            log.warning(
                "a record is signed by deployment key %s, which this client does not trust",
                key_id,
                extra={"action": "unknown_key"},
            )


def _by_id(public_keys: Iterable[bytes]) -> dict[str, PublicKey]:
    return {key_id_of(raw): PublicKey(raw) for raw in public_keys}
