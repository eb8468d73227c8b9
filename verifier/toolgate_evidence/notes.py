"""Ed25519, C2SP signed notes and cosignature/v1, and base64 as bundles write it."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from .base import Failed
from .hashes import sha256

DASH = "\u2014 "
NOTE_ED25519, NOTE_COSIGNATURE_V1 = 0x01, 0x04


def ed25519_ok(public_key: bytes, signature: bytes, message: bytes) -> bool:
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(signature, message)
    except (InvalidSignature, ValueError):
        return False
    return True


def b64(text: Any, what: str) -> bytes:
    """Standard base64 with padding, strictly."""
    if not isinstance(text, str):
        raise Failed(f"{what} is not a base64 string")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise Failed(f"{what} is not valid base64") from exc


def note_key_id(name: str, kind: int, public_key: bytes) -> bytes:
    return sha256(name.encode() + b"\n" + bytes([kind]) + public_key)[:4]


@dataclass(frozen=True)
class Note:
    text: str  # the signed text, every line ending in a newline
    signatures: tuple[tuple[str, bytes, bytes], ...]  # (key name, key id, signature bytes)


def parse_note(note: str) -> Note:
    """A C2SP signed note: text, a blank line, then lines `— <name> base64(key id || signature)`."""
    text, blank, lines = note.rpartition("\n\n")
    if not blank or not note.endswith("\n"):
        raise Failed("the checkpoint is not a signed note (text, a blank line, signature lines)")
    found = []
    for line in lines.splitlines():
        name, _, encoded = line.removeprefix(DASH).partition(" ")
        raw = b64(encoded, "a signature line")
        if not line.startswith(DASH) or not name or len(raw) <= 4:
            raise Failed("a signature line of the checkpoint is not `— <name> <base64>`")
        found.append((name, raw[:4], raw[4:]))
    return Note(text + "\n", tuple(found))


def note_signed(note: Note, name: str, public_key: bytes) -> bool:
    """Whether `name`'s Ed25519 key signed the note's text (signature type 0x01)."""
    wanted = note_key_id(name, NOTE_ED25519, public_key)
    return any(
        n == name and k == wanted and ed25519_ok(public_key, s, note.text.encode()) for n, k, s in note.signatures
    )


def cosigned(note: Note, name: str, public_key: bytes) -> bool | None:
    """Whether the witness `name` cosigned the note (cosignature/v1: 8-byte big-endian time, then
    Ed25519 over "cosignature/v1\\ntime <t>\\n" || text); None: it has no line in the note."""
    wanted = note_key_id(name, NOTE_COSIGNATURE_V1, public_key)
    lines = [s for n, k, s in note.signatures if n == name and k == wanted]
    if not lines:
        return None
    for s in lines:
        at = int.from_bytes(s[:8], "big")
        message = f"cosignature/v1\ntime {at}\n".encode() + note.text.encode()
        if len(s) == 72 and at < 2**63 and ed25519_ok(public_key, s[8:], message):
            return True
    return False


def parse_vkey(vkey: str) -> tuple[str, int, bytes]:
    """A signed-note verifier key `<name>+<hex key id>+<base64(type || public key)>`, its id checked."""
    name, _, rest = vkey.strip().partition("+")
    hex_id, _, encoded = rest.partition("+")
    raw = b64(encoded, "a verifier key")
    if not name or len(raw) != 33 or note_key_id(name, raw[0], raw[1:]).hex() != hex_id.lower():
        raise Failed(f"the verifier key of {name!r} is not <name>+<hex key id>+<base64 key> with a matching id")
    return name, raw[0], raw[1:]
