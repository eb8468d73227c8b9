"""TOOLGATE_AUDIT_WITNESSES as a deployment reads it (toolgate/trust/witness_keys.py)."""

from __future__ import annotations

import json

import pytest

from toolgate.trust.ed25519 import PrivateKey
from toolgate.trust.signed_note import COSIGNATURE_V1, ED25519, NoteError, vkey
from toolgate.trust.witness_keys import witnesses_of

KEY = PrivateKey(b"\x05" * 32).public.raw


def test_none_when_empty() -> None:
    assert witnesses_of("") == [] and witnesses_of("  ") == []


@pytest.mark.parametrize("written", [KEY.hex(), vkey("w1", COSIGNATURE_V1, KEY)])
def test_a_key_as_hex_or_as_a_verifier_key(written: str) -> None:
    [witness] = witnesses_of(json.dumps([{"name": "w1", "url": "http://127.0.0.1:7380/", "public_key": written}]))
    assert (witness.name, witness.url, witness.key.raw) == ("w1", "http://127.0.0.1:7380", KEY)


@pytest.mark.parametrize(
    "witnesses",
    [
        [{"name": "w1", "url": "u", "public_key": vkey("w2", COSIGNATURE_V1, KEY)}],  # another witness's key
        [{"name": "w1", "url": "u", "public_key": vkey("w1", ED25519, KEY)}],  # not a cosigning key
        [{"name": "w 1", "url": "u", "public_key": KEY.hex()}],
    ],
)
def test_a_key_that_is_not_the_witness_is_refused(witnesses: list[dict[str, str]]) -> None:
    with pytest.raises(NoteError):
        witnesses_of(json.dumps(witnesses))


def test_two_witnesses_of_one_name_are_refused() -> None:
    one = {"name": "w1", "url": "u", "public_key": KEY.hex()}
    with pytest.raises(ValueError, match="two witnesses"):
        witnesses_of(json.dumps([one, one]))
