"""Re-drive: when the transport lost what was in flight, Postgres says it again.

Postgres is the system of record and Kafka the transport. A broker that comes back without
its topics (the embedded one keeps them in memory; a real cluster can lose them too) has lost
every record between stages, but not what Postgres holds. `toolgate up` re-drives whenever it
had to create the deployment's topics on a database that already has history (and after it
restarts a broker that died); `toolgate redrive` does it by hand. One pass, in one
transaction, through the outbox (so the relay publishes it, sealed, like any stage output):

    what Postgres holds                          said again
    approvals PENDING                            the confirmation packet and the interim answer
    approvals APPROVED, ticket not consumed      the call released to execution
    outbox rows sent within the relay's          published again: results, releases, packets
    retention (the topics that carried them        and dead letters whose records the broker lost
    are gone)
    keys PENDING                                 nothing here: reconciliation's own pass takes
                                                 them over when their lease ends

What only the agent held (a proposal not yet validated, a call between two stages) is the
agent's to re-publish: `ToolgateClient.wait` does. Everything said twice is answered once:
approvers dedupe packets by approval_id, execution replays by idempotency key and ticket,
agents take the first final observation of a call.
"""

from __future__ import annotations

import logging
from typing import Any

from psycopg import AsyncConnection

from toolgate.states import TicketStatus
from toolgate.store import audit, open_approvals
from toolgate.store.outbox import OutboxRow, enqueue, rewind
from toolgate.topics.catalog import Topics
from toolgate.workers.approval import resume
from toolgate.workers.reconciliation.decision import STAGE
from toolgate.workers.runtime.clock import now_ms

log = logging.getLogger("toolgate.redrive")


async def redrive(conn: AsyncConnection[Any], topics: Topics, *, rewind_outbox: bool) -> dict[str, int]:
    """One re-drive pass inside the caller's transaction; returns what it said again, by kind."""
    now = now_ms()
    ids = await open_approvals.in_flight(conn)
    held = await resume.load(conn, ids)
    rows: list[OutboxRow] = []
    counts = {"approvals_pending": 0, "approvals_released": 0, "outbox_rows": 0}
    for ticket in (held[i] for i in ids if i in held):
        rows += resume.again(ticket, ticket.request.traceparent or "", now)
        counts["approvals_pending" if ticket.status == TicketStatus.PENDING else "approvals_released"] += 1
    if rewind_outbox:
        counts["outbox_rows"] = max(await rewind(conn), 0)
    await enqueue(conn, rows, topics)
    if any(counts.values()):
        await audit.append(conn, [audit.Entry(STAGE, "transport_redriven", "toolgate", detail=counts)])
        log.warning("re-drove what the transport lost: %s", counts, extra={"stage": STAGE, "action": "redrive"})
    return counts
