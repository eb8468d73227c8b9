"""The two evidence verifiers agree everywhere (issue 53: "the same verdicts on the same bundles"):
toolgate's own (`toolgate evidence verify`, ops/evidence_checks/) and the independent one
(verifier/toolgate_evidence/) give every check the same status on many mutated bundles: each
field of the valid test vectors and of tests/unit/evidence_bundles.py's bundles nulled, removed,
emptied and with one byte flipped; `decisions.rederived` aside (the independent one always skips
it). Where they differed, docs/evidence.md now says which is right."""

from __future__ import annotations

import base64
import binascii
import copy
from collections.abc import Iterator
from functools import cache
from typing import Any

import pytest

from tests import evidence_vectors
from tests.unit import evidence_bundles as eb
from tests.unit.test_evidence_verifier import V
from toolgate.ops.evidence_checks.run import verify
from toolgate.ops.evidence_checks.trust import trust_of
from toolgate.trust.ed25519 import PrivateKey
from toolgate.trust.signed_note import COSIGNATURE_V1, vkey

Path = tuple[str | int, ...]
MUTATIONS = ("null", "remove", "empty", "flip")
EMPTY: dict[type, Any] = {str: "", list: [], dict: {}, int: 0}


@cache
def sources() -> dict[str, dict[str, Any]]:
    found = {name: bundle for name, (bundle, _) in evidence_vectors.vectors().items() if not name.startswith("tampe")}
    return found | {"unit-approved": eb.approved(), "unit-refused": eb.refused()}


def paths(value: Any, at: Path = ()) -> Iterator[Path]:
    """Every field's path in `value`, parents before children."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, inner in items:
        yield (*at, key)
        yield from paths(inner, (*at, key))


def flipped(text: str) -> str:
    """One byte of a base64 text's bytes flipped, or else one of its characters changed."""
    try:
        raw = bytearray(base64.b64decode(text, validate=True))
    except (binascii.Error, ValueError):
        raw = bytearray()
    if raw:
        raw[len(raw) // 2] ^= 1
        return base64.b64encode(bytes(raw)).decode()
    middle = len(text) // 2
    return text[:middle] + ("0" if text[middle] != "0" else "1") + text[middle + 1 :]


def mutated(bundle: dict[str, Any], path: Path, how: str) -> dict[str, Any] | None:
    """`bundle` with the field at `path` changed `how` (None: that change changes nothing)."""
    changed = copy.deepcopy(bundle)
    parent: Any = changed
    for step in path[:-1]:
        parent = parent[step]
    old = parent[path[-1]]
    if how == "null":
        parent[path[-1]] = None
    elif how == "remove":
        del parent[path[-1]]
    elif how == "empty":
        if type(old) not in EMPTY or old == EMPTY[type(old)]:
            return None
        parent[path[-1]] = EMPTY[type(old)]
    elif not isinstance(old, str) or not old:
        return None
    else:
        parent[path[-1]] = flipped(old)
    return changed


def statuses(bundle: dict[str, Any], witnesses: list[str] | None = None) -> tuple[dict[str, str], dict[str, str]]:
    """Each verifier's status of every check but decisions.rederived: (toolgate's, the independent one's)."""
    ours = verify(bundle, trust_of(bundle, [], witnesses or []))
    theirs = V.verify(bundle, [], witnesses or [])
    first = {c.name: str(c.status) for c in ours.checks if c.name != "decisions.rederived"}
    second = {c["name"]: c["status"] for c in theirs["checks"] if c["name"] != "decisions.rederived"}
    return first, second


def disagreements(name: str) -> list[str]:
    found = []
    for path in paths(sources()[name]):
        for how in MUTATIONS:
            bundle = mutated(sources()[name], path, how)
            if bundle is None:
                continue
            first, second = statuses(bundle)
            differ = {check: (first[check], second[check]) for check in first if first[check] != second[check]}
            if differ:
                found.append(f"{'.'.join(map(str, path))} {how}: {differ}")
    return found


@pytest.mark.parametrize("name", sorted(sources()))
def test_both_verifiers_give_every_mutated_bundle_the_same_statuses(name: str) -> None:
    assert list(paths(sources()[name])), name
    assert disagreements(name) == []


def test_the_mutations_reach_every_kind_of_field() -> None:
    made = [p for p in paths(sources()["approved"]) for how in MUTATIONS if mutated(sources()["approved"], p, how)]
    assert len(made) > 500
    touched = {p[0] for p in made}
    assert {"keys", "proposal", "call", "decisions", "approval", "execution", "observations", "audit"} <= touched


def test_a_pinned_witness_without_a_line_fails_in_both() -> None:
    stranger = vkey("witness.example/w2", COSIGNATURE_V1, PrivateKey(b"\x78" * 32).public.raw)
    for bundle in sources().values():
        first, second = statuses(bundle, [stranger])
        assert first == second and first["checkpoint.cosignatures"] == "failed"


@pytest.mark.parametrize(
    ("expired_from", "status"), [("COMPLETED", "ok"), ("FAILED_FINAL", "failed"), (None, "failed")]
)
def test_a_key_past_its_window_counts_by_the_status_it_ended_in_in_both(expired_from: str | None, status: str) -> None:
    """A bundle retention keeps is made after the key's deduplication window: EXPIRED, from what it was."""
    bundle = copy.deepcopy(sources()["approved"])
    bundle["execution"].update(status="EXPIRED", expired_from=expired_from)
    first, second = statuses(bundle)
    assert first["execution.once"] == second["execution.once"] == status
