"""toolgate.dead_letter_actions: what an operator did with a dead letter (replayed, discarded), by
its id, written by `toolgate dlq` (ops/dlq.py) with the audit entry that says so, and read by the
same command and the gauges to tell the open letters from the settled ones."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

ACTIONS = "SELECT dead_letter_id, action, actor FROM toolgate.dead_letter_actions"
RECORD = """
INSERT INTO toolgate.dead_letter_actions (dead_letter_id, action, actor, note) VALUES (%s, %s, %s, %s)
ON CONFLICT (dead_letter_id) DO UPDATE SET action = excluded.action, actor = excluded.actor, note = excluded.note,
    at = now()
"""


@dataclass(frozen=True, slots=True)
class Acted:
    """What an operator did with a letter, and who."""

    action: str
    actor: str


def actions(conn: psycopg.Connection[Any]) -> dict[str, Acted]:
    """What operators did with each letter, by its id."""
    return {row[0]: Acted(row[1], row[2]) for row in conn.execute(ACTIONS).fetchall()}


async def record(conn: psycopg.AsyncConnection[Any], dead_letter_id: str, acted: Acted, note: str | None) -> None:
    """Say what an operator did with a letter (the last action taken stands)."""
    await conn.execute(RECORD, (dead_letter_id, acted.action, acted.actor, note))
