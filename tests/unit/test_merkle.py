"""Merkle trees of signed records: every leaf proves its place, and a root's signature is
believed again only under the key and signature that held."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from toolgate.trust.ed25519 import PrivateKey
from toolgate.trust.merkle import (
    MAX_STEPS,
    STEP,
    CheckedRoots,
    leaf_hash,
    length_prefixed,
    merkle_tree,
    root_of,
    signed_root,
)

PURPOSE = b"toolgate.test.root.v1"
KEY, OTHER = PrivateKey(b"\x01" * 32), PrivateKey(b"\x02" * 32)


@given(st.lists(st.binary(min_size=1, max_size=40), min_size=1, max_size=70))
def test_every_leaf_of_any_tree_leads_to_its_root(leaves: list[bytes]) -> None:
    hashed = [leaf_hash(leaf) for leaf in leaves]
    root, proofs = merkle_tree(hashed)
    assert all(root_of(leaf, proof) == root for leaf, proof in zip(hashed, proofs, strict=True))
    # A proof holds for its own leaf only: another leaf taken up the same path reaches another root.
    for leaf, proof in zip(hashed, proofs, strict=True):
        assert all(root_of(other, proof) != root for other in set(hashed) - {leaf})


def test_a_proof_not_made_of_steps_or_longer_than_any_tree_leads_nowhere() -> None:
    leaf = leaf_hash(b"a record")
    assert root_of(leaf, b"L" + bytes(31)) is None
    assert root_of(leaf, b"X" + bytes(32)) is None
    assert root_of(leaf, (b"L" + bytes(32)) * MAX_STEPS) is not None
    assert root_of(leaf, (b"L" + bytes(32)) * (MAX_STEPS + 1)) is None
    assert len(merkle_tree([leaf] * 64)[1][0]) == 6 * STEP


def test_fields_are_joined_so_no_two_lists_give_the_same_bytes() -> None:
    assert length_prefixed([b"ab", b"c"]) != length_prefixed([b"a", b"bc"])
    assert signed_root(PURPOSE, b"r") != signed_root(PURPOSE + b"r", b"")


def test_a_checked_root_is_believed_again_only_under_its_key_and_signature() -> None:
    root = merkle_tree([leaf_hash(b"one"), leaf_hash(b"two")])[0]
    signature = KEY.sign(signed_root(PURPOSE, root))
    roots = CheckedRoots(PURPOSE)
    assert roots.ok(KEY.public, signature, root) and len(roots) == 1
    assert roots.ok(KEY.public, signature, root)  # remembered
    assert not roots.ok(OTHER.public, signature, root)  # the same root and signature, another key
    assert not roots.ok(KEY.public, OTHER.sign(signed_root(PURPOSE, root)), root)
    assert not roots.ok(KEY.public, None, root)
    # Signed under another purpose, a root proves nothing here.
    assert not CheckedRoots(b"another.purpose").ok(KEY.public, signature, root)


def test_checked_roots_are_bounded_and_a_forgotten_root_is_checked_again() -> None:
    roots = CheckedRoots(PURPOSE, kept=4)
    signed = [(r, KEY.sign(signed_root(PURPOSE, r))) for r in (bytes([i]) * 32 for i in range(10))]
    assert all(roots.ok(KEY.public, s, r) for r, s in signed)
    assert len(roots) <= 4
    assert all(roots.ok(KEY.public, s, r) for r, s in signed)
