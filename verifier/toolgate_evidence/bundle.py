"""The bundle as read (no key twice, no NaN), and the keys it is checked with."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from .base import EPOCH, Failed, Skipped
from .notes import NOTE_COSIGNATURE_V1, b64, parse_vkey


def no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        raise ValueError("an object names a key twice, so two readers may read it differently")
    return found


def not_a_number(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def parse_json(text: str | bytes) -> Any:
    """Strict JSON: no NaN or infinities, no key named twice in one object."""
    return json.loads(text, object_pairs_hook=no_duplicate_keys, parse_constant=not_a_number)


def deployment_key_id(public_key: bytes) -> str:
    return "dk_" + hashlib.sha256(public_key).hexdigest()[:16]


def micros(timestamp: Any, what: str) -> int:
    """An RFC 3339 UTC timestamp (`2026-11-30T17:02:03.123456Z`) as microseconds since the epoch."""
    if not isinstance(timestamp, str) or not timestamp.endswith("Z"):
        raise Failed(f"{what} is not an RFC 3339 UTC timestamp")
    try:
        at = datetime.fromisoformat(timestamp[:-1]).replace(tzinfo=UTC)
    except ValueError as exc:
        raise Failed(f"{what} is not an RFC 3339 UTC timestamp") from exc
    return (at - EPOCH) // timedelta(microseconds=1)


@dataclass
class Trusted:
    """The keys the checks use: the bundle's own, or those the auditor pinned instead."""

    deployment: dict[str, bytes] = field(default_factory=dict)  # key id -> Ed25519 public key
    witnesses: list[tuple[str, bytes]] = field(default_factory=list)  # (name, Ed25519 public key)
    pinned_deployment: bool = False
    pinned_witnesses: bool = False
    unreadable: list[str] = field(default_factory=list)  # witnesses' verifier keys that do not parse


def trusted_keys(bundle: dict[str, Any], deployment: Sequence[bytes], witnesses: Sequence[str]) -> Trusted:
    """The deployment keys whose id matches their key (the bundle's, unless `deployment` pins
    some) and the witnesses' cosignature keys (the bundle's, unless `witnesses` pins some)."""
    keys = bundle.get("keys") or {}
    trusted = Trusted(pinned_deployment=bool(deployment), pinned_witnesses=bool(witnesses))
    if deployment:
        trusted.deployment = {deployment_key_id(raw): raw for raw in deployment}
    for entry in [] if deployment else keys.get("deployment") or []:
        try:
            raw = b64(entry.get("public_key"), "a deployment public key")
        except (Failed, AttributeError):
            continue  # as an entry whose id does not match its key: ignored
        if len(raw) == 32 and entry.get("key_id") == deployment_key_id(raw):
            trusted.deployment[entry["key_id"]] = raw
    listed = [w.get("vkey") if isinstance(w, dict) else None for w in keys.get("witnesses") or []]
    for vkey in witnesses or listed:
        try:
            name, kind, raw = parse_vkey(str(vkey))
        except Failed as exc:
            trusted.unreadable.append(str(exc))
            continue
        if kind != NOTE_COSIGNATURE_V1:
            trusted.unreadable.append(f"witness {name}'s verifier key is not a cosignature/v1 key")
        else:
            trusted.witnesses.append((name, raw))
    return trusted


@dataclass
class Bundle:
    data: dict[str, Any]
    keys: Trusted

    def section(self, name: str) -> dict[str, Any]:
        """A section of the bundle; Skipped when it is null."""
        value = self.data.get(name)
        if value is None:
            raise Skipped(f"the bundle has no {name}")
        if not isinstance(value, dict):
            raise Failed(f"the bundle's {name} is not an object")
        return value

    def need(self, section: str, name: str) -> Any:
        """A field of a section; Skipped when it is null or absent (not stored)."""
        value = self.section(section).get(name)
        if value is None:
            raise Skipped(f"{section}.{name} is null (not stored)")
        return value

    def document(self) -> dict[str, Any]:
        """The proposal's signing document, parsed."""
        try:
            document = parse_json(b64(self.need("proposal", "document"), "proposal.document"))
        except ValueError as exc:
            raise Failed(f"proposal.document is not JSON: {exc}") from exc
        if not isinstance(document, dict):
            raise Failed("proposal.document is not a JSON object")
        return document

    def agent_key(self) -> bytes:
        agent = self.data["keys"].get("agent")
        if agent is None:
            raise Skipped("keys.agent is null: the agent's key row was not found")
        return b64(agent["public_key"], "keys.agent.public_key")
