"""`toolgate witness`: a witness of the audit log's checkpoints, run elsewhere with its own key.

An aiohttp server of c2sp.org/tlog-witness's add-checkpoint (`POST /add-checkpoint`); what it
answers is ops/witness_judge.py's. For each origin it serves it keeps, in its state directory,
the size and root hash it last cosigned (`<id>.json`) and that checkpoint with its cosignature
(`<id>.checkpoint`: what `toolgate audit verify --witness-checkpoint` checks a log against), where
<id> is the first 16 hex digits of the SHA-256 of the origin. A request is judged and its outcome
persisted under one lock (and the files replaced atomically, fsynced, before the answer), so two
requests can never roll each other back. A refused request that the log signed (a fork, an
inconsistent proof) is appended to `<id>.refused` as evidence. The directory is locked while the
witness runs: a second witness on it refuses to start.
"""

from __future__ import annotations

import asyncio
import base64
import fcntl
import hashlib
import json
import logging
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from aiohttp import web
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from toolgate.ops.witness_judge import Cosign, Refuse, judge, read
from toolgate.trust.ed25519 import PrivateKey, PublicKey
from toolgate.trust.signed_note import COSIGNATURE_V1, cosign, parse_vkey, vkey
from toolgate.trust.tlog_checkpoint import TreeHead

log = logging.getLogger("toolgate.witness")
SIZE_TYPE = "text/x.tlog.size"
MAX_BODY = 64 * 1024


def keygen(path: Path, name: str) -> str:
    """Write a new witness key to `path` (PEM, owner-only) and its verifier key beside it
    (`<path>.vkey`), and return the verifier key."""
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    verifier = vkey(name, COSIGNATURE_V1, PrivateKey.of(key).public.raw)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(pem)
    Path(f"{path}.vkey").write_text(verifier + "\n")
    return verifier


def name_of(path: Path, key: PrivateKey) -> str:
    """The witness's name, from the verifier key keygen wrote beside its key (which it must match)."""
    name, kind, public = parse_vkey(Path(f"{path}.vkey").read_text())
    if kind != COSIGNATURE_V1 or public != key.public.raw:
        raise ValueError(f"{path}.vkey is not the verifier key of {path}")
    return name


def load_key(path: Path) -> PrivateKey:
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError(f"{path} holds no Ed25519 key")
    return PrivateKey.of(key)


def origin_id(origin: str) -> str:
    return hashlib.sha256(origin.encode()).hexdigest()[:16]


def _replace(path: Path, data: bytes) -> None:
    """Write `path` whole or not at all, durably."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class State:
    """What the witness holds, one origin a file, in a directory it locks while it runs."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self._lock_file: IO[bytes] = open(directory / "witness.lock", "ab")  # noqa: SIM115 (held while it runs)
        try:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            self._lock_file.close()
            raise SystemExit(f"another witness runs on {directory}") from exc

    def close(self) -> None:
        self._lock_file.close()  # and the lock with it

    def held(self, origin: str) -> TreeHead | None:
        path = self.directory / f"{origin_id(origin)}.json"
        if not path.exists():
            return None
        kept = json.loads(path.read_text())
        return TreeHead(origin, int(kept["size"]), base64.b64decode(kept["root"]))

    def keep(self, outcome: Cosign, cosigned_note: str) -> None:
        stem = self.directory / origin_id(outcome.head.origin)
        root = base64.b64encode(outcome.head.root).decode()
        # What it holds first: a crash between the two leaves an older cosigned checkpoint, never
        # a size it would cosign from again after cosigning past it.
        kept = {"origin": outcome.head.origin, "size": outcome.head.size, "root": root}
        _replace(stem.with_suffix(".json"), json.dumps(kept).encode())
        _replace(stem.with_suffix(".checkpoint"), cosigned_note.encode())

    def refused(self, origin: str, refusal: Refuse, body: str) -> None:
        record = {"at": int(time.time()), "status": refusal.status, "reason": refusal.reason, "request": body}
        with open(self.directory / f"{origin_id(origin)}.refused", "a") as out:
            out.write(json.dumps(record) + "\n")


class Witness:
    def __init__(self, name: str, key: PrivateKey, state: State, logs: Mapping[str, Sequence[PublicKey]]) -> None:
        self.name, self.key, self.state, self.logs = name, key, state, logs
        self._lock = asyncio.Lock()

    async def add_checkpoint(self, request: web.Request) -> web.Response:
        body = (await request.read()).decode("utf-8", "replace")
        parsed = read(body)
        if isinstance(parsed, Refuse):
            return web.Response(status=parsed.status, text=parsed.reason + "\n")
        async with self._lock:  # the check and the write of the new size, as one
            outcome = judge(parsed, self.state.held, self.logs)
            if isinstance(outcome, Refuse):
                if outcome.logged:
                    self.state.refused(parsed.head.origin, outcome, body)
                    log.warning(
                        "refused a checkpoint of %s the log signed: %s",
                        parsed.head.origin,
                        outcome.reason,
                        extra={"stage": "witness", "action": "witness_refused"},
                    )
                if outcome.size is not None:
                    return web.Response(status=409, body=f"{outcome.size}\n".encode(), content_type=SIZE_TYPE)
                return web.Response(status=outcome.status, text=outcome.reason + "\n")
            line = cosign(outcome.note.text, self.name, self.key, int(time.time())).line()
            self.state.keep(outcome, str(outcome.note.with_lines(line)))
        return web.Response(status=200, text=line)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_post("/add-checkpoint", self.add_checkpoint)
        return app


def serve(witness: Witness, host: str, port: int) -> None:
    web.run_app(witness.app(), host=host, port=port, print=None, access_log=None)
