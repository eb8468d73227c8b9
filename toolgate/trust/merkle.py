"""Many records, one signature: a Merkle tree over them, its root signed once.

Two signers sign records that leave together this way: the deployment, a round's observations
for one tenant (`integrity.Sealer`), and an agent, the proposals it publishes at once
(`proposal_signing.sign_all`). Each record's own signed bytes are a leaf; the signer signs the
tree's root under a purpose of its own; each record carries the signature and the path from its
leaf to the root. A verifier hashes the path (a 64-record tree: 6 SHA-256s) and checks a root's
signature once for all the records under it (`CheckedRoots`). Leaves and inner nodes are hashed
under different prefixes (as RFC 6962's), and roots are signed under their own purpose, so no
record's bytes can pass for a node or a root.

    leaf = SHA-256(0x00 || signed bytes of the record)
    node = SHA-256(0x01 || left || right)    (both as RFC 6962 hashes them; log_tree.py reuses them)
    proof = steps from the leaf up, 33 bytes each: b"L" or b"R" (the side the sibling is on),
            then the sibling's hash; a level's last node without a sibling rises unchanged
    signed = len || purpose || len || root   (lengths 4-byte big-endian)
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from toolgate.trust.ed25519 import PublicKey

SIBLING_LEFT, SIBLING_RIGHT = b"L", b"R"
STEP = 33  # a proof's step: the sibling's side, then its hash
MAX_STEPS = 32  # a tree of 2**32 records: a longer proof is refused before it is hashed
ROOTS_KEPT = 256  # roots whose signature a verifier has checked, remembered for their other records


def length_prefixed(fields: Sequence[bytes]) -> bytes:
    """Fields joined so that no two different lists of fields give the same bytes."""
    return b"".join(len(f).to_bytes(4, "big") + f for f in fields)


def signed_root(purpose: bytes, root: bytes) -> bytes:
    """What a signer signs for the records under `root`."""
    return length_prefixed([purpose, root])


def leaf_hash(signed: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + signed).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def merkle_tree(leaves: Sequence[bytes]) -> tuple[bytes, list[bytes]]:
    """The root over `leaves` (at least one), and each leaf's proof."""
    levels = [list(leaves)]
    while len(levels[-1]) > 1:
        below = levels[-1]
        above = [node_hash(below[i], below[i + 1]) for i in range(0, len(below) - 1, 2)]
        if len(below) % 2:
            above.append(below[-1])
        levels.append(above)
    proofs = []
    for index in range(len(leaves)):
        steps = bytearray()
        for level in levels[:-1]:
            sibling = index ^ 1
            if sibling < len(level):
                steps += (SIBLING_LEFT if sibling < index else SIBLING_RIGHT) + level[sibling]
            index >>= 1
        proofs.append(bytes(steps))
    return levels[-1][0], proofs


def root_of(leaf: bytes, proof: bytes) -> bytes | None:
    """The root a proof leads to from `leaf`; None for a proof that is not made of steps, or of
    more than MAX_STEPS."""
    if len(proof) % STEP or len(proof) > MAX_STEPS * STEP:
        return None
    node = leaf
    for at in range(0, len(proof), STEP):
        side, sibling = proof[at : at + 1], proof[at + 1 : at + STEP]
        if side == SIBLING_LEFT:
            node = node_hash(sibling, node)
        elif side == SIBLING_RIGHT:
            node = node_hash(node, sibling)
        else:
            return None
    return node


class CheckedRoots:
    """Roots whose signature a verifier has checked, with the key and signature that held: a
    root's other records cost a lookup, not a check. A root is believed again only under the
    same key and the same signature; a root signed by one key proves nothing for another."""

    def __init__(self, purpose: bytes, kept: int = ROOTS_KEPT) -> None:
        self.purpose = purpose
        self.kept = kept
        self._held: dict[bytes, tuple[bytes, bytes]] = {}  # root -> (public key, signature)

    def ok(self, key: PublicKey, signature: bytes | None, root: bytes) -> bool:
        if signature is None:
            return False
        if self._held.get(root) == (key.raw, signature):
            return True
        if not key.ok(signature, signed_root(self.purpose, root)):
            return False
        if len(self._held) >= self.kept:
            self._held.clear()  # safe beside another thread's check; a root forgotten is checked again
        self._held[root] = (key.raw, signature)
        return True

    def __len__(self) -> int:
        return len(self._held)
