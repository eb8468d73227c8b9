"""What toolgate answers is proven by the deployment's signature: the bytes it signs on a record of a
tenant's edge topic (observations, confirmation packets), and the client's check of it
(`EdgeVerifier`). Sealing is toolgate/trust/integrity.py's (`Sealer`); this half imports no
Kafka, so an offline verifier of a call's evidence checks a published observation with it.

    signed   LP("toolgate.edge.v1", topic, key, call_id header, toolgate-proposal header,
             SHA-256(value)), alone; or a leaf of a round's tree whose root is signed under
             "toolgate.edge.root.v1" (`toolgate-proof` the path: toolgate/trust/merkle.py)
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence

from toolgate.topics.headers import CALL_ID, PROPOSAL_DIGEST, header
from toolgate.trust.deployment_keys import key_id_of
from toolgate.trust.ed25519 import PublicKey
from toolgate.trust.merkle import CheckedRoots, leaf_hash, length_prefixed, root_of

log = logging.getLogger("toolgate.keys")

SIGNATURE_HEADER = "toolgate-signature"
PROOF_HEADER = "toolgate-proof"
KEY_HEADER = "toolgate-key-id"  # the id of the key a record's MAC or signature was made with
KEY_ID_MAX = 64  # a longer key id names no key: it is not looked up
RELOAD_EVERY_S = 1.0  # a client reads its keys again for an unknown key id at most this often
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
