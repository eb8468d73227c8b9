"""The parts of a bundle the checks read, and the keys they trust.

A bundle is untrusted JSON: every part is read through these helpers, and a part that is missing
or malformed makes the check that reads it fail, naming the part (`Malformed`), never the whole
verdict. The keys: the deployment's and the witnesses' are the ones the auditor pinned
(`--deployment-key`, `--witness-key`) or else the bundle's own; a bundle that carries its own keys
proves only that it is consistent with itself, and the checks that use them say so. The agent's
and the approvers' keys are always the bundle's (as registered then): the deployment's signed
checkpoint covers the audit rows that recorded them, not the keys themselves.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from toolgate.trust.deployment_keys import key_id_of
from toolgate.trust.ed25519 import PublicKey
from toolgate.trust.signed_note import COSIGNATURE_V1, NoteError, parse_vkey

UNPINNED = "the bundle's own key, not pinned: this shows the bundle consistent, not who signed it"


class Malformed(ValueError):
    """A part of the bundle that is missing or not of its documented form."""


def part(value: Any, *path: str | int) -> Any:
    """`value[path[0]][path[1]]...`, Malformed naming the path when it is not there."""
    at = value
    for step in path:
        try:
            at = at[step]
        except (KeyError, IndexError, TypeError) as exc:
            raise Malformed(f"the bundle has no {'.'.join(str(s) for s in path)}") from exc
    return at


def b64(text: Any, what: str) -> bytes:
    if not isinstance(text, str):
        raise Malformed(f"{what} is not base64 text")
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error as exc:
        raise Malformed(f"{what} is not base64") from exc


def json_of(raw: bytes, what: str) -> dict[str, Any]:
    try:
        found = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise Malformed(f"{what} is not JSON") from exc
    if not isinstance(found, dict):
        raise Malformed(f"{what} is not a JSON object")
    return found


def ms_of(timestamp: Any, what: str) -> int:
    """An RFC 3339 timestamp as milliseconds since the epoch."""
    try:
        at = dt.datetime.fromisoformat(str(timestamp))
    except ValueError as exc:
        raise Malformed(f"{what} is not an RFC 3339 timestamp") from exc
    if at.tzinfo is None:
        raise Malformed(f"{what} names no time zone")
    return int(at.timestamp() * 1000)


def public_key(text: Any, what: str) -> PublicKey:
    try:
        return PublicKey(b64(text, what))
    except ValueError as exc:
        raise Malformed(f"{what} is not an Ed25519 public key") from exc


@dataclass(frozen=True)
class Trust:
    """The deployment's keys by id and the witnesses' (name, key), and whether each was pinned."""

    deployment: dict[str, PublicKey]
    witnesses: tuple[tuple[str, PublicKey], ...]
    deployment_pinned: bool
    witnesses_pinned: bool
    unreadable: tuple[str, ...] = ()  # why each witness entry that is not a verifier key is not one

    def pinned_note(self) -> str:
        return "" if self.deployment_pinned else f" ({UNPINNED})"


def trust_of(bundle: Any, deployment: Sequence[bytes] = (), witnesses: Sequence[str] = ()) -> Trust:
    """The keys the checks use: `deployment` (raw public keys) and `witnesses` (C2SP verifier keys)
    when given, else the bundle's (an entry whose key id is not its key's is ignored)."""
    if deployment:
        by_id = {key_id_of(raw): PublicKey(raw) for raw in deployment}
    else:
        by_id = {}
        for entry in _list(bundle, "deployment"):
            try:
                key = public_key(entry.get("public_key"), "a deployment key")
            except (Malformed, AttributeError):
                continue
            if entry.get("key_id") == key_id_of(key.raw):
                by_id[key_id_of(key.raw)] = key
    vkeys: list[Any] = list(witnesses) or [
        entry.get("vkey") if _is(entry) else None for entry in _list(bundle, "witnesses")
    ]
    found, unreadable = [], []
    for vkey in vkeys:
        try:
            found.append(_witness(str(vkey)))
        except (NoteError, ValueError) as exc:
            unreadable.append(f"the witness verifier key {str(vkey)[:40]!r} is unreadable ({exc})")
    return Trust(by_id, tuple(found), bool(deployment), bool(witnesses), tuple(unreadable))


def _list(bundle: Any, name: str) -> list[Any]:
    keys = bundle.get("keys") if isinstance(bundle, dict) else None
    found = keys.get(name) if isinstance(keys, dict) else None
    return found if isinstance(found, list) else []


def _is(entry: Any) -> bool:
    return isinstance(entry, dict)


def _witness(vkey: str) -> tuple[str, PublicKey]:
    name, kind, raw = parse_vkey(vkey)
    if kind != COSIGNATURE_V1:
        raise NoteError(f"witness {name}'s verifier key is not a cosignature/v1 key")
    return name, PublicKey(raw)


def witness_key(vkey: str) -> tuple[str, PublicKey]:
    """A pinned witness's name and key from its verifier key (NoteError: not one)."""
    return _witness(vkey)
