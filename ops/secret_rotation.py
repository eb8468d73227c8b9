"""`toolgate secret status` and `toolgate secret rotate`: the deployment secret, rotated while
everything runs.

The secret reference holds a keyset (toolgate.trust.keyset); a rotation is three steps, each made on
one host's keyset file and then put in place on every other host:

1. **stage**: a new random secret joins the keyset as the next key, accepted but sealing
   nowhere. Every stage reads its keyset again within `keyset_refresh_seconds`.
2. **promote**: the next key seals; the one that sealed is accepted for a grace window more.
   Refused until every stage seen lately, on every host, reports it accepts the next key
   (`toolgate.key_holders`, store/key_holders.py), and until this host's runtime.json
   lists it for clients: so no record sealed with it is refused anywhere.
3. **retire**: once the grace has passed, the previous key's secret leaves the keyset; its public
   half stays, so `toolgate audit verify` still checks the checkpoints it signed.

`rotate` makes the next step and says what to do on each other host and when the next step is
safe; `rotate --all` makes every step in turn, waiting for each to be safe (one host, or hosts
that share the keyset file, as `toolgate up` and docker-compose's secrets volume do). The keyset
file is written whole (0600, renamed into place in its 0700 directory) under a lock; nothing
printed holds a secret: keys are shown by id and public key.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg

from toolgate.secrets import SecretProvider, env_name
from toolgate.settings import Settings
from toolgate.store import key_holders
from toolgate.store.key_holders import HEARTBEAT_S, Holder
from toolgate.trust.deployment_keys import DeploymentKeys, key_id_of
from toolgate.trust.keyset import (
    KeyEntry,
    Keyset,
    KeysetError,
    KeyState,
    Step,
    iso,
    parse,
    promote,
    render,
    retire,
    stage,
)

LIVE_S = 3 * HEARTBEAT_S  # a stage that reported within this long is running


class RotationRefused(Exception):
    """A step that is not safe now, or cannot be made here (the reasons, never a secret)."""


@dataclass(frozen=True)
class Key:
    """A key as an operator sees it: its id, public key, state and end."""

    key_id: str
    public_key: str
    state: KeyState
    until_ms: int | None

    @classmethod
    def of(cls, entry: KeyEntry) -> Key:
        if entry.secret:
            keys = DeploymentKeys(entry.secret.encode())
            return cls(keys.key_id, keys.public_key.hex(), entry.state, entry.until_ms)
        return cls(key_id_of(bytes.fromhex(entry.public_key)), entry.public_key, entry.state, entry.until_ms)


# --- the keyset file ---------------------------------------------------------------------------


def keyset_path(settings: Settings) -> Path:
    """The file this host's keyset is in; refused when the environment holds it instead."""
    ref = settings.deployment_secret_ref
    if os.environ.get(env_name(ref)):
        raise RotationRefused(
            f"the deployment secret comes from {env_name(ref)} here: rotate the file form "
            f"({settings.secrets_path / ref}) and give every process that, or change the variable "
            "in your secret manager step by step (restarting the processes that read it)"
        )
    path = settings.secrets_path / ref
    if not path.is_file():
        raise RotationRefused(f"no deployment secret at {path}: `toolgate setup` makes one")
    return path


def read(settings: Settings) -> Keyset:
    return parse(SecretProvider(settings.secrets_path).resolve(settings.deployment_secret_ref))


def write(path: Path, keyset: Keyset) -> None:
    """The keyset in place of `path`'s, whole or not at all, readable by its owner only."""
    path.parent.chmod(0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(render(keyset))
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """One rotation at a time on this host's keyset."""
    fd = os.open(path.with_name(f".{path.name}.lock"), os.O_WRONLY | os.O_CREAT, 0o600)
    with os.fdopen(fd, "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RotationRefused("another `toolgate secret rotate` is running on this keyset") from None
        yield


# --- what the deployment holds -----------------------------------------------------------------


def holders(settings: Settings) -> list[Holder]:
    """The stage processes that reported their keys lately, on every host."""
    live = max(LIVE_S, 3 * settings.keyset_refresh_seconds)
    with psycopg.connect(settings.admin_url, autocommit=True) as conn:
        return key_holders.seen_within(conn, live)


def keys(keyset: Keyset) -> list[Key]:
    return [Key.of(entry) for entry in keyset.entries]


def published(settings: Settings) -> list[str] | None:
    """The public keys this host's runtime.json lists for clients (None: no `toolgate up` here)."""
    if not settings.runtime_file.exists():
        return None
    listed = json.loads(settings.runtime_file.read_text()).get("deployment_public_keys")
    return list(listed) if isinstance(listed, list) else []


def blockers(settings: Settings, keyset: Keyset, now_ms: int) -> list[str]:
    """Why the keyset's next step is not safe now (nothing: it is)."""
    step = keyset.step()
    if step is Step.PROMOTE:
        assert keyset.next is not None
        staged = Key.of(keyset.next)
        found = [
            f"{h.name} does not accept {staged.key_id} yet" for h in holders(settings) if staged.key_id not in h.accepts
        ]
        listed = published(settings)
        if listed is not None and staged.public_key not in listed:
            found.append(f"runtime.json does not list {staged.key_id} for this host's clients yet")
        return found
    if step is Step.RETIRE:
        assert keyset.previous is not None and keyset.previous.until_ms is not None
        old = Key.of(keyset.previous)
        found = [f"{h.name} still seals with {old.key_id}" for h in holders(settings) if h.seals == old.key_id]
        if now_ms < keyset.previous.until_ms:
            found.append(f"{old.key_id} is accepted until {iso(keyset.previous.until_ms)}")
        return found
    return []


# --- the steps ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Done:
    step: Step
    key: Key  # the key staged, promoted or retired
    other: Key | None  # promote: the key that sealed before
    path: Path
    keyset: Keyset


def rotate(settings: Settings, grace_s: float | None = None, force: bool = False) -> Done:
    """The keyset's next step on this host, if safe (or `force`d)."""
    grace = settings.keyset_grace_seconds if grace_s is None else grace_s
    if grace < 2 * settings.keyset_refresh_seconds:
        raise RotationRefused(
            f"a grace of {grace:g} s is shorter than two of the stages' keyset reads "
            f"({settings.keyset_refresh_seconds:g} s each): records sealed with the old key would be refused"
        )
    path = keyset_path(settings)
    with locked(path):
        keyset = read(settings)
        now_ms = int(time.time() * 1000)
        found = [] if force else blockers(settings, keyset, now_ms)
        if found:
            raise RotationRefused(f"not yet safe to {keyset.step()}: " + "; ".join(found))
        done = _step(keyset, now_ms, int(grace * 1000), force, path)
        write(path, done.keyset)
        return done


def _step(keyset: Keyset, now_ms: int, grace_ms: int, force: bool, path: Path) -> Done:
    try:
        if keyset.step() is Step.STAGE:
            after = stage(keyset, secrets.token_urlsafe(32))
            assert after.next is not None
            return Done(Step.STAGE, Key.of(after.next), None, path, after)
        if keyset.step() is Step.PROMOTE:
            after = promote(keyset, now_ms, grace_ms)
            assert after.previous is not None
            return Done(Step.PROMOTE, Key.of(after.current), Key.of(after.previous), path, after)
        assert keyset.previous is not None
        old = Key.of(keyset.previous)
        return Done(Step.RETIRE, old, None, path, retire(keyset, now_ms, old.public_key, early=force))
    except KeysetError as exc:
        raise RotationRefused(str(exc)) from None


def rotate_all(
    settings: Settings, say: Callable[[Done], None], wait: Callable[[str], None], grace_s: float | None = None
) -> None:
    """Every step of a rotation in turn, each once it is safe (`wait` says what is awaited)."""
    timeout_s = 10 * max(LIVE_S, 3 * settings.keyset_refresh_seconds)
    while True:
        keyset = read(settings)
        previous = keyset.previous
        # What stages hold may take a while to settle; the grace, exactly as long as it is.
        give_up = max(time.time(), (previous.until_ms or 0) / 1000 if previous else 0) + timeout_s
        while found := blockers(settings, keyset, int(time.time() * 1000)):
            if time.time() > give_up:
                raise RotationRefused(f"not safe to {keyset.step()} after waiting: " + "; ".join(found))
            wait("; ".join(found))
            time.sleep(1.0)
            keyset = read(settings)
        done = rotate(settings, grace_s)
        say(done)
        if done.step is Step.RETIRE:
            return
