"""The audit log's Merkle tree (RFC 6962, RFC 9162): its head, its compact range, and the
inclusion and consistency proofs that a witness and an auditor check.

The leaves are the chain's rows in id order; a leaf's data is its row's 32-byte chain hash, and
leaves and nodes are hashed as merkle.py hashes them (0x00 and 0x01 prefixes, RFC 6962's). The
tree of size n is kept between checkpoints as its **compact range**: the roots of the perfect
subtrees that n's binary digits cut it into, largest first (at most 64 hashes). A new head extends
the range over the rows appended since, without reading the rows before; and a consistency proof
from size m to size n needs only m's range and the rows after m: every node it names covers
either one of the range's subtrees or leaves after m (RFC 6962 §2.1.2, SUBPROOF).

    root of a range    its hashes folded from the right: node(h0, node(h1, ... node(hk-1, hk)))
    empty tree         SHA-256 of nothing
    proofs             lists of 32-byte hashes, in RFC 6962's order; checked as RFC 9162 §2.1.3.2
                       (inclusion) and §2.1.4.2 (consistency) check them
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from toolgate.trust.merkle import leaf_hash, node_hash

HASH = 32
EMPTY_ROOT = hashlib.sha256(b"").digest()
MAX_PROOF = 63  # hashes: a tree of 2**63 leaves (tlog-witness's bound on a proof's lines)


def split(size: int) -> int:
    """The largest power of two below `size` (at least 2): where RFC 6962 splits a tree."""
    return 1 << ((size - 1).bit_length() - 1)


def spans(size: int) -> list[tuple[int, int]]:
    """The leaves [lo, hi) of each perfect subtree of a tree of `size`'s compact range."""
    found, lo = [], 0
    for bit in reversed(range(size.bit_length())):
        if size >> bit & 1:
            found.append((lo, lo + (1 << bit)))
            lo += 1 << bit
    return found


@dataclass(frozen=True)
class CompactRange:
    size: int
    hashes: tuple[bytes, ...] = ()

    def root(self) -> bytes:
        if not self.hashes:
            return EMPTY_ROOT
        folded = self.hashes[-1]
        for left in reversed(self.hashes[:-1]):
            folded = node_hash(left, folded)
        return folded

    def extend(self, leaves: Iterable[bytes]) -> CompactRange:
        """The range after appending leaves (each a leaf's data: a row's chain hash)."""
        hashes, size = list(self.hashes), self.size
        for data in leaves:
            merged, below = leaf_hash(data), size
            while below & 1:
                merged = node_hash(hashes.pop(), merged)
                below >>= 1
            hashes.append(merged)
            size += 1
        return CompactRange(size, tuple(hashes))

    def to_bytes(self) -> bytes:
        return b"".join(self.hashes)

    @classmethod
    def of_bytes(cls, size: int, raw: bytes) -> CompactRange:
        if size < 0 or len(raw) != HASH * size.bit_count():
            raise ValueError(f"a compact range of {size} leaves is {size.bit_count()} hashes")
        return cls(size, tuple(raw[i : i + HASH] for i in range(0, len(raw), HASH)))


def tree_hash(hashed: Sequence[bytes]) -> bytes:
    """RFC 6962's Merkle Tree Hash of leaves already hashed (at least one)."""
    if len(hashed) == 1:
        return hashed[0]
    k = split(len(hashed))
    return node_hash(tree_hash(hashed[:k]), tree_hash(hashed[k:]))


class Known:
    """A tree of `old.size + len(after)` leaves, of which only `old`'s compact range and the leaves
    after it are known: enough for its root, its range, and consistency proofs from `old.size`."""

    def __init__(self, old: CompactRange, after: Sequence[bytes]) -> None:
        self.m = old.size
        self.size = old.size + len(after)
        self.subtrees = dict(zip(spans(old.size), old.hashes, strict=True))
        self.after = [leaf_hash(data) for data in after]

    def hash(self, lo: int, hi: int) -> bytes:
        known = self.subtrees.get((lo, hi))
        if known is not None:
            return known
        if lo >= self.m:
            return tree_hash(self.after[lo - self.m : hi - self.m])
        if hi - lo == 1:
            raise ValueError(f"leaf {lo} is inside the compact range, not known on its own")
        k = split(hi - lo)
        return node_hash(self.hash(lo, lo + k), self.hash(lo + k, hi))

    def root(self) -> bytes:
        return self.hash(0, self.size) if self.size else EMPTY_ROOT

    def range(self) -> CompactRange:
        return CompactRange(self.size, tuple(self.hash(lo, hi) for lo, hi in spans(self.size)))

    def consistency(self) -> list[bytes]:
        """The proof that the tree of size m (old's) is a prefix of this one; empty from 0 or m."""
        if self.m in (0, self.size):
            return []
        return self._subproof(self.m, 0, self.size, True)

    def _subproof(self, m: int, lo: int, hi: int, whole: bool) -> list[bytes]:
        if m == hi - lo:
            return [] if whole else [self.hash(lo, hi)]
        k = split(hi - lo)
        if m <= k:
            return [*self._subproof(m, lo, lo + k, whole), self.hash(lo + k, hi)]
        return [*self._subproof(m - k, lo + k, hi, False), self.hash(lo, lo + k)]

    def inclusion(self, index: int) -> list[bytes]:
        """The audit path of leaf `index` (which must be after the compact range: with an empty
        one, any leaf)."""
        if not self.m <= index < self.size:
            raise ValueError(f"leaf {index} is not one of the known leaves")
        return self._path(index, 0, self.size)

    def _path(self, index: int, lo: int, hi: int) -> list[bytes]:
        if hi - lo == 1:
            return []
        k = split(hi - lo)
        if index < lo + k:
            return [*self._path(index, lo, lo + k), self.hash(lo + k, hi)]
        return [*self._path(index, lo + k, hi), self.hash(lo, lo + k)]


def inclusion_ok(data: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes) -> bool:
    """Whether `proof` puts the leaf of `data` at `index` of the tree of `size` under `root`."""
    if not 0 <= index < size or len(proof) > MAX_PROOF:
        return False
    fn, sn, folded = index, size - 1, leaf_hash(data)
    for sibling in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            folded = node_hash(sibling, folded)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            folded = node_hash(folded, sibling)
        fn, sn = fn >> 1, sn >> 1
    return sn == 0 and folded == root


def consistency_ok(old_size: int, size: int, old_root: bytes, root: bytes, proof: Sequence[bytes]) -> bool:
    """Whether `proof` shows the tree of `old_size` under `old_root` a prefix of the tree of `size`
    under `root`."""
    if not 0 <= old_size <= size or len(proof) > MAX_PROOF:
        return False
    if old_size == size:
        return not proof and old_root == root
    if old_size == 0:
        return not proof
    path = [old_root, *proof] if old_size & (old_size - 1) == 0 else list(proof)
    if not path:
        return False
    fn, sn = old_size - 1, size - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    first = second = path[0]
    for step in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            first, second = node_hash(step, first), node_hash(step, second)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            second = node_hash(second, step)
        fn, sn = fn >> 1, sn >> 1
    return sn == 0 and first == old_root and second == root


def path_spans(index: int, size: int) -> list[tuple[int, int]]:
    """The leaves [lo, hi) of each node of leaf `index`'s audit path in the tree of `size`, in
    RFC 6962's order (from the leaf up)."""
    found: list[tuple[int, int]] = []
    lo, hi = 0, size
    while hi - lo > 1:
        k = split(hi - lo)
        if index < lo + k:
            found.append((lo + k, hi))
            hi = lo + k
        else:
            found.append((lo, lo + k))
            lo += k
    return found[::-1]


class InclusionPaths:
    """The audit paths of chosen leaves of a tree of `size`, taken in one pass over its leaves that
    holds a compact range and the nodes the paths need, never the leaves: a chosen leaf's left
    siblings are the range's subtrees when it arrives, its right siblings perfect subtrees hashed as
    the range grows over them, or subtrees of the tree's right edge, folds of the final range."""

    def __init__(self, size: int, start: CompactRange | None = None) -> None:
        """`start`: the compact range of the tree's first leaves, when only the paths of leaves after
        them are wanted (the leaves added are then those after them)."""
        self.size = size
        self.count = start.size if start is not None else 0
        # (first leaf, hash) of the range's subtrees
        self._stack = [(lo, h) for (lo, _), h in zip(spans(self.count), start.hashes if start else (), strict=True)]
        self._wanted: dict[int, list[tuple[int, int]]] = {}
        self._needed: set[tuple[int, int]] = set()
        self._found: dict[tuple[int, int], bytes] = {}

    def add(self, data: bytes, chosen: bool = False) -> int:
        """Take the next leaf (its data); `chosen`: its path is wanted. Returns its index."""
        at = self.count
        if at >= self.size:
            raise ValueError(f"the tree has {self.size} leaves")
        if chosen:
            self._choose(at)
        merged, lo, below = leaf_hash(data), at, at
        self._keep(lo, at + 1, merged)
        while below & 1:
            lo, left = self._stack.pop()
            merged = node_hash(left, merged)
            self._keep(lo, at + 1, merged)
            below >>= 1
        self._stack.append((lo, merged))
        self.count += 1
        return at

    def _choose(self, at: int) -> None:
        spans_ = self._wanted[at] = path_spans(at, self.size)
        held = dict(self._stack)
        for lo, hi in spans_:
            if hi <= at:
                self._found[(lo, hi)] = held[lo]
            else:
                self._needed.add((lo, hi))

    def _keep(self, lo: int, hi: int, node: bytes) -> None:
        if (lo, hi) in self._needed:
            self._found[(lo, hi)] = node

    def proofs(self) -> dict[int, list[bytes]]:
        """Each chosen leaf's audit path, by its index (once every leaf was added)."""
        if self.count != self.size:
            raise ValueError(f"the tree has {self.size} leaves; {self.count} were added")
        for lo, hi in self._needed - self._found.keys():  # on the right edge: hi == size
            folded = [h for start, h in self._stack if start >= lo]
            node = folded[-1]
            for left in reversed(folded[:-1]):
                node = node_hash(left, node)
            self._found[(lo, hi)] = node
        return {at: [self._found[span] for span in spans_] for at, spans_ in self._wanted.items()}
