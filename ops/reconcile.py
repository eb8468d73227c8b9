"""`toolgate reconcile` and `toolgate prune`: one pass of the reconciliation stage's jobs, run
by an operator instead of on the stage's timer.

This is the one place in `ops/` that names the reconciliation worker's classes.
"""

from __future__ import annotations

import asyncio

from toolgate.contracts.budgets import load_budgets
from toolgate.contracts.registry import load_registry
from toolgate.settings import Settings
from toolgate.workers.reconciliation.pruner import Pruner
from toolgate.workers.reconciliation.reconciler import Reconciler


def reconcile_once(settings: Settings) -> dict[str, int]:
    """Resolve the idempotency keys left PENDING by crashes; how many took each way out."""
    reconciler = Reconciler(load_registry(settings.contracts_dir), settings)

    async def one() -> dict[str, int]:
        try:
            return await reconciler.reconcile_once()
        finally:
            await reconciler.http.close()
            await reconciler.pool.close()

    return asyncio.run(one())


def prune_once(settings: Settings) -> dict[str, int]:
    """Delete the history older than its retention; how many rows each table lost."""
    pruner = Pruner(load_registry(settings.contracts_dir), load_budgets(settings.policy_dir), settings)

    async def one() -> dict[str, int]:
        try:
            return await pruner.prune_once()
        finally:
            await pruner.close()

    return asyncio.run(one())
