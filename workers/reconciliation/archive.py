"""Evidence kept before retention prunes (issue 53, part 4): each pass of the pruner first keeps
the bundle of every call whose operational rows are old enough to go (migration 0037's
`toolgate.evidence_bundles`), ARCHIVE_BATCH calls to a transaction, for as long as calls are due or
until the pass's time budget is spent (half the retention interval), so the archive keeps pace with
a deployment's calls and a pass over years of history still ends and the next goes on. The prune statements
delete a call's rows only once its bundle is kept (store/retention.py), so a pass that stopped
early loses nothing: the calls it did not reach keep their rows until a later pass archives them."""

from __future__ import annotations

import time
from typing import Any

from psycopg_pool import AsyncConnectionPool

from toolgate.store import evidence_archive
from toolgate.workers.reconciliation.evidence import PublicKeys, assemble

ARCHIVE_BATCH = 50


async def archive_due(pool: AsyncConnectionPool[Any], keys: PublicKeys, age_s: float, budget_s: float) -> int:
    """Keep the bundles of the calls due, for at most `budget_s` (a batch begun ends); how many were kept."""
    kept, until = 0, time.monotonic() + budget_s
    while time.monotonic() < until:
        async with pool.connection() as conn, conn.transaction():
            due = await evidence_archive.due(conn, age_s, ARCHIVE_BATCH)
            if not due:
                break
            bundles = await assemble(conn, keys, [(tenant, call) for tenant, call, _ in due])
            await evidence_archive.keep(conn, [(b, at) for b, (_, _, at) in zip(bundles, due, strict=True)])
        kept += len(due)
        if len(due) < ARCHIVE_BATCH:
            break
    return kept
