"""Signed notes (c2sp.org/signed-note) and their two Ed25519 signature types: a signer's own
(0x01) and a witness's timestamped cosignature (c2sp.org/tlog-cosignature, cosignature/v1, 0x04).

A note is text (lines, each ending in a newline), a blank line, then one signature line per
signer: `— <key name> base64(key id || signature)`. A key id is the first 4 bytes of
SHA-256(key name || "\\n" || type || public key), so a verifier takes only the lines its keys
name and ignores the rest.

    Ed25519 (0x01)         signature over the note's text
    cosignature/v1 (0x04)  8-byte big-endian POSIX time || signature over
                           "cosignature/v1\\ntime <t>\\n" || the note's text
    verifier key           <name>+<hex key id>+base64(type || public key)
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass

from toolgate.trust.ed25519 import PrivateKey, PublicKey

DASH = "\u2014 "
ED25519, COSIGNATURE_V1 = 0x01, 0x04
KEY_ID = 4


class NoteError(ValueError):
    """Text that is not a signed note (or a verifier key)."""


def key_id(name: str, kind: int, public: bytes) -> bytes:
    return hashlib.sha256(name.encode() + b"\n" + bytes([kind]) + public).digest()[:KEY_ID]


def check_name(name: str) -> str:
    if not name or any(c.isspace() for c in name) or "+" in name:
        raise NoteError(f"a key name is non-empty, without spaces or '+': {name!r}")
    return name


@dataclass(frozen=True)
class Signature:
    name: str
    key_id: bytes
    signature: bytes

    def line(self) -> str:
        return f"{DASH}{self.name} {base64.b64encode(self.key_id + self.signature).decode()}\n"


@dataclass(frozen=True)
class Note:
    text: str
    signatures: tuple[Signature, ...]

    def __str__(self) -> str:
        return self.text + "\n" + "".join(s.line() for s in self.signatures)

    def with_lines(self, lines: str) -> Note:
        """The note with signature lines added (as a witness answers them)."""
        return Note(self.text, self.signatures + signature_lines(lines))


def signature_lines(lines: str) -> tuple[Signature, ...]:
    found = []
    for line in lines.splitlines():
        if not line.startswith(DASH):
            raise NoteError("a signature line starts with an em dash and a space")
        name, _, encoded = line[len(DASH) :].partition(" ")
        try:
            raw = base64.b64decode(encoded, validate=True)
        except binascii.Error as exc:
            raise NoteError("a signature is base64") from exc
        if len(raw) <= KEY_ID:
            raise NoteError("a signature line holds a key id and a signature")
        found.append(Signature(check_name(name), raw[:KEY_ID], raw[KEY_ID:]))
    return tuple(found)


def parse(note: str) -> Note:
    """A note's text and signature lines (NoteError if it has no blank line before them)."""
    text, blank, lines = note.rpartition("\n\n")
    if not blank or not note.endswith("\n"):
        raise NoteError("a note is text, a blank line, and signature lines, each ending in a newline")
    signatures = signature_lines(lines)
    if not signatures:
        raise NoteError("a note carries at least one signature")
    return Note(text + "\n", signatures)


def sign(text: str, name: str, key: PrivateKey) -> Note:
    """`text` signed by `name`'s Ed25519 key."""
    signature = key.sign(text.encode())
    return Note(text, (Signature(check_name(name), key_id(name, ED25519, key.public.raw), signature),))


def signed_by(note: Note, name: str, key: PublicKey) -> bool:
    wanted = key_id(name, ED25519, key.raw)
    return any(
        s.name == name and s.key_id == wanted and key.ok(s.signature, note.text.encode()) for s in note.signatures
    )


def cosigned_message(text: str, at: int) -> bytes:
    return f"cosignature/v1\ntime {at}\n".encode() + text.encode()


def cosign(text: str, name: str, key: PrivateKey, at: int) -> Signature:
    """A witness's cosignature/v1 of a checkpoint's text, made at POSIX time `at`."""
    signature = key.sign(cosigned_message(text, at))
    return Signature(check_name(name), key_id(name, COSIGNATURE_V1, key.public.raw), at.to_bytes(8, "big") + signature)


def cosigned_at(note: Note, name: str, key: PublicKey) -> int | None:
    """When `name` cosigned the note with `key` (POSIX seconds), or None: no valid cosignature."""
    wanted = key_id(name, COSIGNATURE_V1, key.raw)
    for s in note.signatures:
        if s.name == name and s.key_id == wanted and len(s.signature) == 72:
            at = int.from_bytes(s.signature[:8], "big")
            if at < 2**63 and key.ok(s.signature[8:], cosigned_message(note.text, at)):
                return at
    return None


def vkey(name: str, kind: int, public: bytes) -> str:
    """A verifier key: what an operator hands to those who check `name`'s signatures."""
    encoded = base64.b64encode(bytes([kind]) + public).decode()
    return f"{check_name(name)}+{key_id(name, kind, public).hex()}+{encoded}"


def parse_vkey(text: str) -> tuple[str, int, bytes]:
    """(name, signature type, public key) of a verifier key, its key id checked."""
    name, hex_id, encoded = [*text.strip().split("+", 2), "", ""][:3]  # base64 may hold "+"
    try:
        raw = base64.b64decode(encoded, validate=True)
        ok = len(raw) == 33 and key_id(name, raw[0], raw[1:]).hex() == hex_id.lower()
    except (binascii.Error, ValueError) as exc:
        raise NoteError("a verifier key is <name>+<hex key id>+<base64 key>") from exc
    if not ok:
        raise NoteError("a verifier key's id does not match its name and key")
    return check_name(name), raw[0], raw[1:]
