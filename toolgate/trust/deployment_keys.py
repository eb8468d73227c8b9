"""The deployment's keys as a process holds them: each secret's derived keys, named by an id, and
the keyset behind the secret reference, read again while the process runs.

A secret yields, through HKDF-SHA-256 under a label each, a MAC key per topic and the
deployment's Ed25519 key (toolgate.trust.integrity uses them). Its **key id** is `dk_` and the first
16 hex digits of the SHA-256 of that Ed25519 public key: public, short, and the same on every
host, so each MAC and signature names the key that made it and a verifier takes that key, not
every key it holds.

The secret reference holds a keyset (toolgate.trust.keyset). A `LiveKeyset` reads it when made, then
again every `keyset_refresh_seconds` (5 by default) and at once (at most once a second) when a
record names a key it does not hold, as a host that promoted before this one has read the new
keyset would make: a rotation takes effect without a restart, and the secret is resolved afresh
as every secret reference is. A keyset that cannot be read (a file being copied) leaves the one
read before in force, and is said once in the log, without its content. Every secret read is
registered with the scrubber.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Protocol

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from toolgate.scrubber import SCRUBBER
from toolgate.secrets import SecretMissing, SecretProvider
from toolgate.settings import Settings
from toolgate.trust.ed25519 import PrivateKey
from toolgate.trust.keyset import Keyset, KeysetError, parse

log = logging.getLogger("toolgate.keys")

LEARN_EVERY_S = 1.0  # a record naming an unknown key reads the keyset again at most this often


def derive(secret: bytes, label: str) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=label.encode()).derive(secret)


def key_id_of(public_key: bytes) -> str:
    """The id of the deployment key whose Ed25519 public key is `public_key`."""
    return "dk_" + hashlib.sha256(public_key).hexdigest()[:16]


class DeploymentKeys:
    """The keys one deployment secret yields. Holding it is what makes a process a stage."""

    def __init__(self, secret: bytes) -> None:
        if len(secret) < 16:
            raise ValueError("the deployment secret must be at least 16 bytes")
        self._secret = secret
        self._mac_keys: dict[str, bytes] = {}

    @classmethod
    def load(cls, secrets: SecretProvider, ref: str) -> DeploymentKeys:
        """The keys of the key that seals now in the keyset `ref` resolves to."""
        return cls(parse(secrets.resolve(ref)).current.secret.encode())

    def mac(self, topic: str, value: bytes) -> bytes:
        return hmac.new(self._mac_key(topic), value, hashlib.sha256).digest()

    def _mac_key(self, topic: str) -> bytes:
        key = self._mac_keys.get(topic)
        if key is None:
            key = self._mac_keys[topic] = derive(self._secret, f"toolgate stage mac v1 {topic}")
        return key

    def mac_ok(self, topic: str, value: bytes, mac: bytes | None) -> bool:
        return mac is not None and hmac.compare_digest(self.mac(topic, value), mac)

    def derive_macs(self, topics: Iterable[str]) -> None:
        """Derive the MAC keys of `topics` now, not as their first records pass."""
        for topic in topics:
            self._mac_key(topic)

    @cached_property
    def signing_key(self) -> PrivateKey:
        return PrivateKey(derive(self._secret, "toolgate deployment signing v1"))

    @cached_property
    def public_key(self) -> bytes:
        return self.signing_key.public.raw

    @cached_property
    def key_id(self) -> str:
        return key_id_of(self.public_key)

    # A key alone is a key source: it seals, and it is all it accepts.
    def view(self) -> KeyView:
        return self._view

    def learn(self, key_id: str) -> KeyView:
        return self._view

    @cached_property
    def _view(self) -> KeyView:
        return KeyView(self, {self.key_id: self})


@dataclass(frozen=True)
class KeyView:
    """The keys a process uses at one time: the one it seals with, and every one it accepts (by
    id, the sealing key first)."""

    sealing: DeploymentKeys
    accepted: Mapping[str, DeploymentKeys]


class KeySource(Protocol):
    """Where a process gets its keys: one key (`DeploymentKeys`) or a keyset (`LiveKeyset`)."""

    def view(self) -> KeyView: ...

    def learn(self, key_id: str) -> KeyView:
        """The view, read again first if `key_id` is not in it (and that was not just done)."""
        ...


class LiveKeyset:
    """The keyset behind the deployment's secret reference, read again while the process runs."""

    def __init__(
        self,
        secrets: SecretProvider,
        ref: str,
        refresh_s: float = 5.0,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._secrets = secrets
        self._ref = ref
        self._refresh_s = refresh_s
        self._clock = clock
        self._monotonic = monotonic
        self._derived: dict[str, DeploymentKeys] = {}
        self._lock = threading.Lock()
        self._complained = False
        self.keyset, self._view, self._read_at, self._due = self._read()  # fails loudly at start

    def view(self) -> KeyView:
        if self._monotonic() >= self._due:
            self._reread()
        return self._view

    def learn(self, key_id: str) -> KeyView:
        if key_id not in self._view.accepted and self._monotonic() - self._read_at >= LEARN_EVERY_S:
            self._reread()
        return self.view()

    def _reread(self) -> None:
        with self._lock:
            try:
                self.keyset, self._view, self._read_at, self._due = self._read()
                self._complained = False
            except (SecretMissing, KeysetError, ValueError, OSError) as exc:
                self._read_at = self._monotonic()
                self._due = self._read_at + self._refresh_s
                if not self._complained:
                    self._complained = True
                    log.warning(
                        "the deployment keyset could not be read again; the one read before stays in force: %s",
                        type(exc).__name__,
                        extra={"action": "keyset_unreadable", "stage": "keys"},
                    )

    def _read(self) -> tuple[Keyset, KeyView, float, float]:
        """The keyset now, its view, when it was read and when to read it again (at the latest
        when the previous key's grace ends, so it is refused on time)."""
        keyset = parse(self._secrets.resolve(self._ref))
        now_ms = int(self._clock() * 1000)
        held = keyset.accepted(now_ms)
        for entry in keyset.entries:
            SCRUBBER.register(entry.secret)
        keys = {entry.secret: self._keys(entry.secret) for entry in held}
        self._derived = keys  # keys no longer held are forgotten
        view = KeyView(keys[keyset.current.secret], {k.key_id: k for k in keys.values()})
        read_at = self._monotonic()
        due = read_at + self._refresh_s
        previous = keyset.previous
        if previous is not None and previous.until_ms is not None and previous.until_ms > now_ms:
            due = min(due, read_at + (previous.until_ms - now_ms) / 1000)
        return keyset, view, read_at, due

    def _keys(self, secret: str) -> DeploymentKeys:
        return self._derived.get(secret) or DeploymentKeys(secret.encode())

    def public_keys(self, retired: bool = False) -> list[bytes]:
        """The public keys of the keys accepted now (the sealing key's first), and with `retired`
        those of every other key the keyset names, for checking what they signed before."""
        view = self.view()
        found = [view.sealing.public_key, *(k.public_key for k in view.accepted.values())]
        if retired:
            found += [DeploymentKeys(e.secret.encode()).public_key for e in self.keyset.entries if e.secret]
            found += [bytes.fromhex(e.public_key) for e in self.keyset.retired]
        return list(dict.fromkeys(found))

    # What callers of one key ask of the deployment's keys: the sealing key's.
    @property
    def signing_key(self) -> PrivateKey:
        return self.view().sealing.signing_key

    @property
    def public_key(self) -> bytes:
        return self.view().sealing.public_key

    @property
    def key_id(self) -> str:
        return self.view().sealing.key_id


_LIVE: dict[tuple[str, str, float], LiveKeyset] = {}
_LIVE_LOCK = threading.Lock()


def deployment_keys(settings: Settings) -> LiveKeyset:
    """The deployment's keyset, from its secret reference (fails loudly if it resolves to
    nothing). One per process and reference: a stage's sealer, its relay and its audit
    checkpoints see one keyset, read once per interval."""
    key = (str(settings.secrets_path), settings.deployment_secret_ref, settings.keyset_refresh_seconds)
    with _LIVE_LOCK:
        live = _LIVE.get(key)
        if live is None:
            secrets = SecretProvider(settings.secrets_path)
            live = _LIVE[key] = LiveKeyset(secrets, settings.deployment_secret_ref, settings.keyset_refresh_seconds)
    return live


def public_keys_of(text: str) -> list[bytes]:
    """Public keys written as hex, separated by commas (TOOLGATE_DEPLOYMENT_PUBLIC_KEY)."""
    return [bytes.fromhex(part.strip()) for part in text.split(",") if part.strip()]
