"""A deployed policy set's signature (issue 51, part 4): what `toolgate policy deploy` signs with
the deployment's Ed25519 key, and what a policy worker checks before it takes the set.

The signed bytes are length-prefixed fields under a purpose of their own (no other signature of
the deployment's shares them): the deployment's id (the row's, taken before it is written, so an
old signed row copied under a new id does not verify: no rollback by replay), its role
(`enforcing` or `shadow`: a shadow's signature does not make it enforce), the set's digest (the
worker recomputes it from the stored files) or "" for a shadow's end, and who deployed it.

toolgate has no operator key of its own: operators act through the deployment's keys (the audit
log's checkpoints are signed the same way), so the deployment's key signs, and the row names its
key id; a worker checks it with the key named, among the keys it trusts, retired ones included,
so a rotation of the deployment secret leaves a deployed set valid.
"""

from __future__ import annotations

from dataclasses import dataclass

from toolgate.trust.checkpoint_keys import TrustedKeys
from toolgate.trust.ed25519 import PrivateKey

PURPOSE = b"toolgate.policy-set.v1"


@dataclass(frozen=True)
class Signed:
    """What a deployment's signature covers."""

    deployment_id: int
    role: str
    digest: str | None  # None: a shadow's end
    deployed_by: str

    def message(self) -> bytes:
        fields = [PURPOSE, str(self.deployment_id).encode(), self.role.encode()]
        fields += [(self.digest or "").encode(), self.deployed_by.encode()]
        return b"".join(len(f).to_bytes(4, "big") + f for f in fields)


def sign(what: Signed, key: PrivateKey) -> bytes:
    return key.sign(what.message())


def verified(what: Signed, key_id: str, signature: bytes | None, trusted: TrustedKeys) -> bool:
    """Whether `signature` is the key `key_id`'s over `what`, and that key one of `trusted`."""
    return bool(signature) and key_id in trusted.keys and trusted.ok(key_id, bytes(signature or b""), what.message())
