"""A stage tells Postgres which deployment keys it holds, so a rotation knows when a step is safe.

Every stage process writes one row (`toolgate.key_holders`, migration 0022): its host, stage and
pid, the id of the key it seals with and the ids of those it accepts, each time it reads its
keyset (every `keyset_refresh_seconds`). `toolgate secret rotate` promotes a staged key only
once every stage seen lately, on every host, accepts it, and `toolgate secret status` lists
them; rows of processes gone a day are deleted as the others report. No secret is written:
key ids are derived from public keys.
"""

from __future__ import annotations

import os
import socket

from toolgate.deployment_keys import KeySource
from toolgate.workers.runtime.db import make_pool

REPORT = """
WITH gone AS (DELETE FROM toolgate.key_holders WHERE seen_at < now() - interval '1 day')
INSERT INTO toolgate.key_holders (host, stage, pid, seals, accepts, seen_at) VALUES (%s, %s, %s, %s, %s, now())
ON CONFLICT (host, stage, pid) DO UPDATE SET seals = excluded.seals, accepts = excluded.accepts, seen_at = now()
"""


class KeyHolders:
    """Reports the keys a stage process holds (a one-connection pool, opened on first report)."""

    def __init__(self, database_url: str, stage: str, keys: KeySource) -> None:
        self.stage = stage
        self.keys = keys
        self.host = socket.gethostname()
        self.pool = make_pool(database_url, f"{stage}-keys", max_size=1)
        self._opened = False

    async def report(self) -> None:
        view = self.keys.view()
        if not self._opened:
            await self.pool.open()
            self._opened = True
        async with self.pool.connection() as conn, conn.transaction():
            await conn.execute(REPORT, (self.host, self.stage, os.getpid(), view.sealing.key_id, sorted(view.accepted)))
