"""The audit log's tree (toolgate/trust/log_tree.py): RFC 6962's roots and proofs on the reference
vectors of Certificate Transparency (as Trillian's and the CT tests hold them), a compact range
that extends as the whole tree would be hashed, and proofs that verify as RFC 9162 checks them,
and do not once anything in them changes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolgate.trust.log_tree import (
    EMPTY_ROOT,
    CompactRange,
    Known,
    consistency_ok,
    inclusion_ok,
    tree_hash,
)
from toolgate.trust.merkle import leaf_hash

LEAVES = [
    bytes.fromhex(h)
    for h in ("", "00", "10", "2021", "3031", "40414243", "5051525354555657", "606162636465666768696a6b6c6d6e6f")
]
ROOTS = [
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]
INCLUSION = {
    0: ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"],
    5: ["bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"],
}  # fmt: skip
CONSISTENCY = {
    (1, 8): INCLUSION[0],
    (6, 8): ["0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
             "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
             "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"],
    (2, 5): ["5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
             "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"],
}  # fmt: skip


def tree_of(leaves: list[bytes]) -> CompactRange:
    return CompactRange(0).extend(leaves)


@pytest.mark.parametrize("size", range(1, 9))
def test_roots_are_rfc_6962s_reference_roots(size: int) -> None:
    assert tree_of(LEAVES[:size]).root().hex() == ROOTS[size - 1]
    assert tree_hash([leaf_hash(d) for d in LEAVES[:size]]).hex() == ROOTS[size - 1]


def test_the_empty_tree_is_the_hash_of_nothing() -> None:
    assert CompactRange(0).root() == EMPTY_ROOT
    assert EMPTY_ROOT.hex() == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


@pytest.mark.parametrize("index", sorted(INCLUSION))
def test_inclusion_proofs_are_the_reference_ones_and_verify(index: int) -> None:
    proof = Known(CompactRange(0), LEAVES).inclusion(index)
    assert [p.hex() for p in proof] == INCLUSION[index]
    assert inclusion_ok(LEAVES[index], index, 8, proof, bytes.fromhex(ROOTS[7]))
    assert not inclusion_ok(LEAVES[index], index ^ 1, 8, proof, bytes.fromhex(ROOTS[7]))
    assert not inclusion_ok(LEAVES[index] + b"x", index, 8, proof, bytes.fromhex(ROOTS[7]))


@pytest.mark.parametrize(("old", "size"), sorted(CONSISTENCY))
def test_consistency_proofs_are_the_reference_ones_and_verify(old: int, size: int) -> None:
    # Made from the old tree's compact range and the leaves after it only.
    known = Known(tree_of(LEAVES[:old]), LEAVES[old:size])
    proof = known.consistency()
    assert [p.hex() for p in proof] == CONSISTENCY[(old, size)]
    old_root, root = bytes.fromhex(ROOTS[old - 1]), bytes.fromhex(ROOTS[size - 1])
    assert known.root() == root
    assert consistency_ok(old, size, old_root, root, proof)
    assert not consistency_ok(old, size, bytes(32), root, proof)
    assert not consistency_ok(old, size, old_root, bytes(32), proof)
    assert not consistency_ok(old, size, old_root, root, proof[:-1])


def test_compact_range_round_trips_through_bytes() -> None:
    tree = tree_of(LEAVES[:7])
    assert len(tree.hashes) == 3
    assert CompactRange.of_bytes(7, tree.to_bytes()) == tree
    with pytest.raises(ValueError, match="3 hashes"):
        CompactRange.of_bytes(7, tree.to_bytes()[:-1])


def test_a_leaf_inside_the_compact_range_is_not_known() -> None:
    with pytest.raises(ValueError, match="not one of the known leaves"):
        Known(tree_of(LEAVES[:4]), LEAVES[4:]).inclusion(2)


@given(st.integers(0, 70), st.integers(0, 70), st.integers(0, 69))
def test_any_prefix_proves_consistent_and_any_leaf_included(old: int, grown: int, index: int) -> None:
    leaves = [i.to_bytes(32, "big") for i in range(old + grown)]
    before, after = tree_of(leaves[:old]), tree_of(leaves)
    known = Known(before, leaves[old:])
    assert known.root() == after.root() and known.range() == after
    assert consistency_ok(old, len(leaves), before.root(), after.root(), known.consistency())
    if 0 < old < len(leaves):
        forked = tree_of([*leaves[: old - 1], b"forked", *leaves[old:]])
        assert not consistency_ok(old, len(leaves), before.root(), forked.root(), known.consistency())
    if index < len(leaves):
        proof = Known(CompactRange(0), leaves).inclusion(index)
        assert inclusion_ok(leaves[index], index, len(leaves), proof, after.root())
