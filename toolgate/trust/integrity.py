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
  key (`TOOLGATE_DEPLOYMENT_PUBLIC_KEY`, or `runtime.json` under `toolgate up`). The signed
  bytes and the client's check (`EdgeVerifier`) are toolgate/trust/edge_signing.py's, which
  imports no Kafka (an offline verifier of evidence uses them); this module re-exports them.

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

from collections.abc import Iterable, Sequence

from toolgate.topics.catalog import Topics
from toolgate.topics.headers import Headers
from toolgate.trust.deployment_keys import DeploymentKeys as DeploymentKeys
from toolgate.trust.deployment_keys import KeySource
from toolgate.trust.deployment_keys import deployment_keys as deployment_keys
from toolgate.trust.deployment_keys import derive as derive
from toolgate.trust.edge_signing import EDGE_PURPOSE as EDGE_PURPOSE
from toolgate.trust.edge_signing import KEY_HEADER as KEY_HEADER
from toolgate.trust.edge_signing import KEY_ID_MAX as KEY_ID_MAX
from toolgate.trust.edge_signing import PROOF_HEADER as PROOF_HEADER
from toolgate.trust.edge_signing import ROOT_PURPOSE as ROOT_PURPOSE
from toolgate.trust.edge_signing import SIGNATURE_HEADER as SIGNATURE_HEADER
from toolgate.trust.edge_signing import EdgeVerifier as EdgeVerifier
from toolgate.trust.edge_signing import edge_signed_bytes as edge_signed_bytes
from toolgate.trust.edge_signing import raw_header as raw_header
from toolgate.trust.merkle import leaf_hash, merkle_tree, signed_root

MAC_HEADER = "toolgate-mac"
SEALS = (MAC_HEADER, SIGNATURE_HEADER, PROOF_HEADER, KEY_HEADER)
MACED = frozenset({"validated", "authorized", "executable", "results", "deadletter"})
SIGNED = frozenset({"observations", "approvals_requested"})


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
