"""The deployment's keyset: the secrets it seals and accepts with, and how a rotation moves them.

One deployment secret is the root of every stage MAC and of the deployment's Ed25519 key
(toolgate.trust.integrity). So that it can change without stopping anything, its secret reference
holds a keyset rather than one secret: the key every stage seals with, and the keys stages still
(or already) accept. A rotation moves each key one state on, one step at a time
(`toolgate secret rotate`, ops/secret_rotation.py):

    state      seals  accepted               it gets there by
    next       no     yes                    stage: a new random secret, accepted everywhere first
    current    yes    yes                    promote: the next key seals from now on
    previous   no     until its `until`      promote: the key that sealed before, for a grace window
    retired    no     no                     retire, once past `until`: the secret is dropped and
                                             only the public half stays, so the audit checkpoints
                                             it signed can still be checked

Staging first is what makes a rotation safe across hosts: a record sealed with the new key by a
host that promoted is accepted by a host that has not promoted yet, because that host already
accepts the next key. The steps go in one order only (stage, promote, retire), so a keyset holds
at most one next and one previous key.

The value of the secret reference (a file in the secrets directory, or an environment variable):

    toolgate-keyset v1
    current <secret>
    next <secret>
    previous <secret> <until, ISO 8601 UTC>
    retired <public key, hex>

A value without that first line is one secret alone, as every deployment held before keysets:
a keyset whose only key is current. Errors never quote a line: a line holds a secret. Nothing
here reads a clock or makes a secret: both come in as arguments.
"""

from __future__ import annotations

import datetime as dt
import enum
import re
from dataclasses import dataclass, replace

HEADER = "toolgate-keyset v1"
MIN_SECRET_BYTES = 16
_SECRET = re.compile(r"\S+")
_PUBLIC = re.compile(r"[0-9a-f]{64}")


class KeysetError(ValueError):
    """A keyset that cannot be read, or a step it cannot take (never quoting a secret)."""


class KeyState(enum.StrEnum):
    NEXT = "next"
    CURRENT = "current"
    PREVIOUS = "previous"
    RETIRED = "retired"


class Step(enum.StrEnum):
    """What `toolgate secret rotate` does next to a keyset."""

    STAGE = "stage"
    PROMOTE = "promote"
    RETIRE = "retire"


@dataclass(frozen=True)
class KeyEntry:
    state: KeyState
    secret: str = ""  # every state but retired
    public_key: str = ""  # hex, retired keys only (the others derive theirs from the secret)
    until_ms: int | None = None  # previous keys only: when they stop being accepted


@dataclass(frozen=True)
class Keyset:
    entries: tuple[KeyEntry, ...]

    def _one(self, state: KeyState) -> KeyEntry | None:
        return next((e for e in self.entries if e.state is state), None)

    @property
    def current(self) -> KeyEntry:
        entry = self._one(KeyState.CURRENT)
        assert entry is not None  # parse and every step keep exactly one
        return entry

    @property
    def next(self) -> KeyEntry | None:
        return self._one(KeyState.NEXT)

    @property
    def previous(self) -> KeyEntry | None:
        return self._one(KeyState.PREVIOUS)

    @property
    def retired(self) -> tuple[KeyEntry, ...]:
        return tuple(e for e in self.entries if e.state is KeyState.RETIRED)

    def accepted(self, now_ms: int) -> tuple[KeyEntry, ...]:
        """The keys a record may be sealed with at `now_ms`: the current one first (the likeliest),
        then the next, then the previous while its grace lasts."""
        previous = self.previous
        held = [self.current, self.next, previous if previous and _before(now_ms, previous) else None]
        return tuple(e for e in held if e is not None)

    def step(self) -> Step:
        """The step a rotation takes next: promote a staged key, retire a previous one, or stage."""
        if self.next is not None:
            return Step.PROMOTE
        if self.previous is not None:
            return Step.RETIRE
        return Step.STAGE


def _before(now_ms: int, entry: KeyEntry) -> bool:
    return entry.until_ms is not None and now_ms < entry.until_ms


# --- the document ------------------------------------------------------------------------------


def parse(text: str) -> Keyset:
    """The keyset a secret reference's value holds (a bare secret: that secret, current)."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines or lines[0] != HEADER:
        if len(text.strip().encode()) < MIN_SECRET_BYTES:
            raise KeysetError(f"the deployment secret must be at least {MIN_SECRET_BYTES} bytes")
        return checked(Keyset((KeyEntry(KeyState.CURRENT, text.strip()),)))
    return checked(Keyset(tuple(_entry(line, n) for n, line in enumerate(lines[1:], start=2))))


def _entry(line: str, n: int) -> KeyEntry:
    state, _, rest = line.partition(" ")
    fields = rest.split()
    try:
        kind = KeyState(state)
    except ValueError:
        raise KeysetError(f"keyset line {n}: unknown state (next, current, previous or retired)") from None
    if kind is KeyState.RETIRED:
        if len(fields) != 1 or not _PUBLIC.fullmatch(fields[0]):
            raise KeysetError(f"keyset line {n}: a retired key is its public key, 64 hex digits")
        return KeyEntry(kind, public_key=fields[0])
    if len(fields) != (2 if kind is KeyState.PREVIOUS else 1):
        wanted = "a secret and the time it stops being accepted" if kind is KeyState.PREVIOUS else "one secret"
        raise KeysetError(f"keyset line {n}: a {kind} key is {wanted}")
    until = _time_ms(fields[1], n) if kind is KeyState.PREVIOUS else None
    return KeyEntry(kind, _secret(fields[0], n), until_ms=until)


def _secret(secret: str, n: int) -> str:
    if not _SECRET.fullmatch(secret) or len(secret.encode()) < MIN_SECRET_BYTES:
        raise KeysetError(f"keyset line {n}: a secret is at least {MIN_SECRET_BYTES} bytes, without spaces")
    return secret


def _time_ms(text: str, n: int) -> int:
    try:
        at = dt.datetime.fromisoformat(text)
    except ValueError:
        raise KeysetError(f"keyset line {n}: the time a key stops being accepted is ISO 8601") from None
    if at.tzinfo is None:
        raise KeysetError(f"keyset line {n}: the time a key stops being accepted names its zone (Z)")
    return int(at.timestamp() * 1000)


def iso(ms: int) -> str:
    """A time as the keyset writes it: UTC, to the millisecond."""
    at = dt.datetime.fromtimestamp(ms / 1000, dt.UTC)
    return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def checked(keyset: Keyset) -> Keyset:
    """`keyset`, if it holds what a keyset must: one current key, at most one next and one
    previous, and no secret twice."""
    count = {state: sum(e.state is state for e in keyset.entries) for state in KeyState}
    if count[KeyState.CURRENT] != 1:
        raise KeysetError("a keyset holds exactly one current key")
    if count[KeyState.NEXT] > 1 or count[KeyState.PREVIOUS] > 1:
        raise KeysetError("a keyset holds at most one next and one previous key")
    secrets = [e.secret for e in keyset.entries if e.secret]
    if len(set(secrets)) != len(secrets):
        raise KeysetError("a keyset holds each secret once")
    return keyset


def render(keyset: Keyset) -> str:
    """The document `parse` reads back: current, next, previous, then the retired keys."""
    order = {KeyState.CURRENT: 0, KeyState.NEXT: 1, KeyState.PREVIOUS: 2, KeyState.RETIRED: 3}
    lines = [HEADER]
    for entry in sorted(keyset.entries, key=lambda e: order[e.state]):
        if entry.secret and not _SECRET.fullmatch(entry.secret):
            raise KeysetError(f"the {entry.state} secret holds spaces: a keyset line cannot hold it")
        if entry.state is KeyState.RETIRED:
            lines.append(f"retired {entry.public_key}")
        elif entry.state is KeyState.PREVIOUS:
            assert entry.until_ms is not None
            lines.append(f"previous {entry.secret} {iso(entry.until_ms)}")
        else:
            lines.append(f"{entry.state} {entry.secret}")
    return "\n".join(lines) + "\n"


# --- the steps of a rotation -------------------------------------------------------------------


def stage(keyset: Keyset, secret: str) -> Keyset:
    """`secret` accepted everywhere, sealing nowhere yet: the first step."""
    if keyset.step() is not Step.STAGE:
        raise KeysetError(f"a rotation is under way: its next step is {keyset.step()}, not stage")
    return checked(Keyset((*keyset.entries, KeyEntry(KeyState.NEXT, _secret(secret, 0)))))


def promote(keyset: Keyset, now_ms: int, grace_ms: int) -> Keyset:
    """The next key seals from now on; the current one is accepted for `grace_ms` more."""
    staged = keyset.next
    if staged is None:
        raise KeysetError("no key is staged: stage one first")
    if grace_ms < 0:
        raise KeysetError("a grace window is not negative")
    old = keyset.current
    entries = [e for e in keyset.entries if e.state not in (KeyState.NEXT, KeyState.CURRENT)]
    entries += [
        replace(staged, state=KeyState.CURRENT),
        replace(old, state=KeyState.PREVIOUS, until_ms=now_ms + grace_ms),
    ]
    return checked(Keyset(tuple(entries)))


def retire(keyset: Keyset, now_ms: int, public_key: str, early: bool = False) -> Keyset:
    """The previous key's secret dropped, its public half (`public_key`, hex) kept. Refused while
    its grace lasts, unless `early`: records sealed with it and not yet read are then refused."""
    previous = keyset.previous
    if previous is None:
        raise KeysetError("no previous key to retire")
    if _before(now_ms, previous) and not early:
        assert previous.until_ms is not None
        raise KeysetError(f"the previous key is accepted until {iso(previous.until_ms)}: retire it after")
    if not _PUBLIC.fullmatch(public_key):
        raise KeysetError("a retired key is its public key, 64 hex digits")
    kept = [e for e in keyset.entries if e is not previous]
    if not any(e.public_key == public_key for e in kept):
        kept.append(KeyEntry(KeyState.RETIRED, public_key=public_key))
    return checked(Keyset(tuple(kept)))
