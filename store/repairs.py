"""toolgate.repair_attempts: every failed validation a model may repair, by run (tenant, agent,
run_id) and logical operation; what the repair loop (workers/validation/repair_log.py) reads and
adds to once per round."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import astuple, dataclass
from typing import Any

from psycopg import AsyncConnection

from toolgate.store.db import keyed

REPAIRS = """
SELECT tenant_id, agent_id, run_id, logical_operation_id, call_id, payload_fingerprint, error_fingerprint
FROM toolgate.repair_attempts
WHERE (tenant_id, agent_id, run_id) IN (SELECT * FROM unnest(%b::text[], %b::text[], %b::text[]))
"""
RECORD_REPAIRS = """
INSERT INTO toolgate.repair_attempts (tenant_id, agent_id, run_id, logical_operation_id, call_id,
    payload_fingerprint, error_fingerprint)
SELECT * FROM unnest(%b::text[], %b::text[], %b::text[], %b::text[], %b::text[], %b::text[], %b::text[])
ON CONFLICT DO NOTHING
"""
Run = tuple[str, str, str]  # (tenant, agent, run_id)


@dataclass(frozen=True, slots=True)
class Repair:
    """One failed validation of a run's logical operation, by the fingerprints of its payload and
    of its errors."""

    tenant_id: str
    agent_id: str
    run_id: str
    logical_operation_id: str
    call_id: str
    payload_fingerprint: str
    error_fingerprint: str

    @property
    def run(self) -> Run:
        return self.tenant_id, self.agent_id, self.run_id


async def of_runs(conn: AsyncConnection[Any], runs: Sequence[Run]) -> list[Repair]:
    """Every repair recorded for these runs."""
    cur = await keyed(conn, REPAIRS, tuple([run[i] for run in runs] for i in range(3)))
    return [Repair(*row) for row in await cur.fetchall()]


async def record(conn: AsyncConnection[Any], repairs: Sequence[Repair]) -> None:
    """Add these repairs (one already recorded is kept as it was)."""
    if repairs:
        await conn.execute(RECORD_REPAIRS, [list(column) for column in zip(*map(astuple, repairs), strict=True)])
