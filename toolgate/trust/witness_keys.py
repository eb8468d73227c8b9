"""The witnesses of the audit log, as a deployment is configured with them
(TOOLGATE_AUDIT_WITNESSES): each one's name, the URL prefix of its add-checkpoint, and its public
key, as hex or as the verifier key `toolgate witness keygen` printed."""

from __future__ import annotations

import json
from dataclasses import dataclass

from toolgate.trust.ed25519 import PublicKey
from toolgate.trust.signed_note import COSIGNATURE_V1, NoteError, check_name, parse_vkey


@dataclass(frozen=True)
class WitnessKey:
    name: str
    url: str
    key: PublicKey


def key_of(name: str, text: str) -> PublicKey:
    if "+" not in text:
        return PublicKey(bytes.fromhex(text.strip()))
    named, kind, raw = parse_vkey(text)
    if named != name or kind != COSIGNATURE_V1:
        raise NoteError(f"the verifier key of witness {name!r} names {named!r}, signature type {kind}")
    return PublicKey(raw)


def witnesses_of(text: str) -> list[WitnessKey]:
    """The witnesses of a TOOLGATE_AUDIT_WITNESSES value (none when it is empty)."""
    if not text.strip():
        return []
    found = []
    for item in json.loads(text):
        name = check_name(str(item["name"]))
        found.append(WitnessKey(name, str(item.get("url", "")).rstrip("/"), key_of(name, str(item["public_key"]))))
    if len({w.name for w in found}) != len(found):
        raise ValueError("two witnesses of one name")
    return found
