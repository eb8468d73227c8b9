"""SHA-256, toolgate's Merkle paths (its batch signatures) and RFC 9162 inclusion proofs."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from .base import Failed


def sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def leaf_hash(data: bytes) -> bytes:
    return sha256(b"\x00" + data)


def node_hash(left: bytes, right: bytes) -> bytes:
    return sha256(b"\x01" + left + right)


def length_prefixed(fields: Sequence[bytes]) -> bytes:
    return b"".join(len(f).to_bytes(4, "big") + f for f in fields)


def path_root(leaf: bytes, proof: bytes) -> bytes:
    """The root a toolgate Merkle path leads to from `leaf`: steps of 33 bytes, b"L" or b"R" (the
    side the sibling is on) then the sibling's hash, from the leaf up; at most 32 steps."""
    if len(proof) % 33 or len(proof) > 32 * 33:
        raise Failed("the Merkle path is not a whole number of 33-byte steps (at most 32)")
    node = leaf
    for at in range(0, len(proof), 33):
        side, sibling = proof[at : at + 1], proof[at + 1 : at + 33]
        if side not in (b"L", b"R"):
            raise Failed("a Merkle path step names neither side")
        node = node_hash(sibling, node) if side == b"L" else node_hash(node, sibling)
    return node


def inclusion_root(data: bytes, index: int, size: int, proof: Sequence[bytes]) -> bytes | None:
    """The root RFC 9162 2.1.3.2's verification computes for leaf `data` at `index` of a tree of
    `size` with the inclusion proof `proof`; None where the proof does not fit the tree."""
    if not 0 <= index < size or len(proof) > 63:
        return None
    fn, sn, r = index, size - 1, leaf_hash(data)
    for p in proof:
        if sn == 0:
            return None
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            r = node_hash(r, p)
        fn, sn = fn >> 1, sn >> 1
    return r if sn == 0 else None
