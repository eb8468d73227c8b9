"""Ed25519 checks (toolgate/trust/ed25519.py): through ed25519-zebra, they answer as libsodium does for
every signature an honest signer makes and every one made from it by someone else, and refuse
what libsodium refuses of keys."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from nacl.bindings import crypto_scalarmult_ed25519_base_noclamp
from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

from toolgate.trust.ed25519 import PrivateKey, PublicKey

L = 2**252 + 27742317777372353535851937790883648493  # the order of the prime-order group
IDENTITY = b"\x01" + bytes(31)  # the neutral point: a small-order key


def sodium_ok(public: bytes, signature: bytes, message: bytes) -> bool:
    try:
        VerifyKey(public).verify(message, signature)
    except BadSignatureError:
        return False
    return True


@settings(max_examples=200, deadline=None)
@given(
    seed=st.binary(min_size=32, max_size=32),
    message=st.binary(max_size=2048),
    flip=st.integers(min_value=0, max_value=8 * 64 - 1),
    other=st.binary(max_size=2048),
)
def test_checks_agree_with_libsodium(seed: bytes, message: bytes, flip: int, other: bytes) -> None:
    key = PrivateKey(seed)
    signature = key.sign(message)
    altered = bytearray(signature)
    altered[flip // 8] ^= 1 << (flip % 8)
    for sig, msg in ((signature, message), (bytes(altered), message), (signature, other)):
        assert key.public.ok(sig, msg) is sodium_ok(key.public.raw, sig, msg)
    assert key.public.ok(signature, message)
    assert not key.public.ok(bytes(altered), message)


def test_refuses_a_non_canonical_s() -> None:
    key = PrivateKey(bytes(range(32)))
    signature = key.sign(b"m")
    s = int.from_bytes(signature[32:], "little") + L
    assert s < 2**256
    assert not key.public.ok(signature[:32] + s.to_bytes(32, "little"), b"m")


def test_a_small_order_key_checks_nothing() -> None:
    """Under the neutral point every (R = sB, s) satisfies the equation for any message: ZIP 215
    alone would admit it; the key is refused, as libsodium refuses it."""
    s = (123456789).to_bytes(32, "little")
    signature = crypto_scalarmult_ed25519_base_noclamp(s) + s
    key = PublicKey(IDENTITY)
    assert not key.ok(signature, b"any message")
    assert not sodium_ok(IDENTITY, signature, b"any message")


def test_refuses_missing_and_short_signatures() -> None:
    key = PrivateKey(bytes(32))
    assert not key.public.ok(None, b"m")
    assert not key.public.ok(b"", b"m")
    assert not key.public.ok(key.sign(b"m")[:63], b"m")
