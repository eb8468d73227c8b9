"""toolgate.observations (migration 0036): every observation as it was published, seals included,
so a call's evidence bundle can show an auditor the deployment's signature over exactly what the
agent read (issue 53).

Written by the stage that seals and sends the observations (workers/runtime/delivery.py), one
statement per round, before the round's records are produced. Read by `toolgate evidence`;
pruned by retention with the history of calls (store/retention.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection

from toolgate.store.db import columns

KEEP = """
INSERT INTO toolgate.observations (tenant_id, call_id, topic, key, value, headers)
SELECT tenant_id, call_id, topic, key, value, headers::jsonb
FROM unnest(%b::text[], %b::text[], %b::text[], %b::bytea[], %b::bytea[], %b::text[])
     AS o(tenant_id, call_id, topic, key, value, headers)
"""


@dataclass(frozen=True, slots=True)
class Published:
    """An observation as it leaves: its tenant and call, its (physical) topic, key and value, and
    its headers as JSON text, `[[name, base64 of the value or null], ...]` in their order."""

    tenant_id: str
    call_id: str
    topic: str
    key: bytes | None
    value: bytes
    headers: str


async def keep(conn: AsyncConnection[Any], published: Sequence[Published]) -> None:
    """Store these observations, in one statement."""
    await conn.execute(KEEP, columns(Published, published))
