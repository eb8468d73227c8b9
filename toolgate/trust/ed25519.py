"""Ed25519 on the hot path: every proposal is verified, every observation signed and verified.

Signatures are made through libsodium (PyNaCl), the fastest of the three here: OpenSSL
(cryptography) is slower, and so is ed25519-zebra, which derives the key again for each
signature. They are checked through ed25519-zebra (the Zcash Foundation's Rust crate, by its
`py-ed25519-zebra-bindings`): faster than libsodium, and far faster than OpenSSL. Two checks a
call (validation the proposal's, the agent the observation's) are a noticeable part of a call's
CPU (docs/performance.md, "Figures behind the code").

The two differ only on signatures no honest signer makes. ed25519-zebra checks by ZIP 215:
the cofactored equation, and point encodings need not be canonical; libsodium 1.0.18 checks the
cofactorless one and refuses non-canonical and small-order points. Both refuse a non-canonical
S, and the hash binds R's and A's bytes, so nobody but the key's holder can turn a valid
signature into another valid one: what ZIP 215 admits beyond libsodium is signatures that the
key's holder crafted, which prove that holder's intent all the same. A key that is not a
canonical point of the prime-order group (small-order keys check signatures of any message)
checks nothing: every signature is refused under it, as libsodium refuses them.

Keys are still made, stored and read as PEM with cryptography (the keyring, `--public-key`
files); only their raw bytes cross over.
"""

from __future__ import annotations

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from ed25519_zebra import ed_verify
from nacl.bindings import crypto_core_ed25519_is_valid_point
from nacl.signing import SigningKey


class PublicKey:
    """A public key that checks signatures."""

    __slots__ = ("_usable", "raw")

    def __init__(self, raw: bytes) -> None:
        if len(raw) != 32:
            raise ValueError("an Ed25519 public key is 32 bytes")
        self.raw = raw
        # A canonical point of the prime-order group, as libsodium's check asks of a key.
        self._usable = bool(crypto_core_ed25519_is_valid_point(raw))

    def ok(self, signature: bytes | None, message: bytes) -> bool:
        if not self._usable or not signature or len(signature) != 64:
            return False
        return bool(ed_verify(signature, message, self.raw))


class PrivateKey:
    """A private key that signs; made from a cryptography key or a 32-byte seed."""

    __slots__ = ("_key", "public")

    def __init__(self, seed: bytes) -> None:
        self._key = SigningKey(seed)
        self.public = PublicKey(bytes(self._key.verify_key))

    @classmethod
    def of(cls, key: Ed25519PrivateKey) -> PrivateKey:
        seed = key.private_bytes(
            serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
        )
        return cls(seed)

    def sign(self, message: bytes) -> bytes:
        return bytes(self._key.sign(message).signature)
