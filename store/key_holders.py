"""toolgate.key_holders (migration 0022): one row per stage process, the deployment key it seals
with and those it accepts. Each stage writes its own (workers/runtime/key_holders.py), at once when
what it holds changes and otherwise every HEARTBEAT_S; `toolgate secret` reads those seen lately
(ops/secret_rotation.py). Rows of processes gone a day are deleted as the others report."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

HEARTBEAT_S = 10.0  # a process whose keys did not change reports this often

REPORT = """
WITH gone AS (DELETE FROM toolgate.key_holders WHERE seen_at < now() - interval '1 day')
INSERT INTO toolgate.key_holders (host, stage, pid, seals, accepts, seen_at) VALUES (%s, %s, %s, %s, %s, now())
ON CONFLICT (host, stage, pid) DO UPDATE SET seals = excluded.seals, accepts = excluded.accepts, seen_at = now()
"""
HOLDERS = """
SELECT host, stage, pid, seals, accepts, extract(epoch FROM now() - seen_at)::float8 FROM toolgate.key_holders
WHERE seen_at > now() - make_interval(secs => %s) ORDER BY host, stage, pid
"""


@dataclass(frozen=True, slots=True)
class Holder:
    """A stage process and the keys it holds, as it reported them `age_s` ago."""

    host: str
    stage: str
    pid: int
    seals: str
    accepts: tuple[str, ...]
    age_s: float

    @property
    def name(self) -> str:
        return f"{self.stage}@{self.host} pid {self.pid}"


async def report(
    conn: psycopg.AsyncConnection[Any], host: str, stage: str, pid: int, held: tuple[str, tuple[str, ...]]
) -> None:
    """Write what a process holds: the key id it seals with, and those it accepts."""
    await conn.execute(REPORT, (host, stage, pid, held[0], list(held[1])))


def seen_within(conn: psycopg.Connection[Any], seconds: float) -> list[Holder]:
    """The processes that reported within the last `seconds`, by host, stage and pid."""
    rows = conn.execute(HOLDERS, (seconds,)).fetchall()
    return [Holder(h, s, p, seals, tuple(accepts), age) for h, s, p, seals, accepts, age in rows]
