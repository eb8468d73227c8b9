"""A stage tells Postgres which deployment keys it holds, so a rotation knows when a step is safe.

Every stage process writes one row (`toolgate.key_holders`, migration 0022): its host, stage and
pid, the id of the key it seals with and the ids of those it accepts. It reads its keyset every
`keyset_refresh_seconds` and writes at once when what it holds changed, otherwise every
HEARTBEAT_S, which says it still runs: an idle stage that wrote a row every 5 s spent a good
share of its idle CPU on it (docs/performance.md, "Figures behind the code"). `toolgate secret
rotate` promotes a staged key only once every stage seen lately (within three heartbeats), on
every host, accepts it, and `toolgate secret status` lists them; rows of processes gone a day are
deleted as the others report. No secret is written: key ids are derived from public keys.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable

from toolgate.store import key_holders
from toolgate.store.db import make_pool
from toolgate.store.key_holders import HEARTBEAT_S
from toolgate.trust.deployment_keys import KeySource

Held = tuple[str, tuple[str, ...]]  # the key id it seals with, and those it accepts


class KeyHolders:
    """Reports the keys a stage process holds (a one-connection pool, opened on first report)."""

    def __init__(
        self, database_url: str, stage: str, keys: KeySource, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.stage = stage
        self.keys = keys
        self.host = socket.gethostname()
        self.pool = make_pool(database_url, f"{stage}-keys", max_size=1)
        self.clock = clock
        self._opened = False
        self._reported: tuple[Held, float] | None = None  # what was written last, and when

    async def report(self) -> None:
        view = self.keys.view()
        held = (view.sealing.key_id, tuple(sorted(view.accepted)))
        now = self.clock()
        if not due(held, self._reported, now):
            return
        if not self._opened:
            await self.pool.open()
            self._opened = True
        async with self.pool.connection() as conn, conn.transaction():
            await key_holders.report(conn, self.host, self.stage, os.getpid(), held)
        self._reported = (held, now)


def due(held: Held, reported: tuple[Held, float] | None, now: float) -> bool:
    """Whether to write what a process holds: the first time, when it changed, or a heartbeat."""
    return reported is None or reported[0] != held or now - reported[1] >= HEARTBEAT_S
