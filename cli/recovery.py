"""One pass of what the reconciliation stage does on its own, run by an operator: `reconcile`,
`redrive`, `prune`."""

from __future__ import annotations

from typing import Annotated

import typer

from toolgate.cli.common import print_json, running


def reconcile(once: Annotated[bool, typer.Option("--once", help="run one pass and exit")] = True) -> None:
    """Resolve idempotency keys left PENDING by crashes (one pass)."""
    from toolgate.ops.reconcile import reconcile_once

    print_json(reconcile_once(running()))


def redrive() -> None:
    """Re-publish what Postgres holds in flight (pending packets, approved releases, the outbox
    rows of the last hour), for a Kafka that lost its topics while toolgate ran; `toolgate up`
    does it by itself whenever it has to create the topics. Prints what it said again."""
    from toolgate.ops.stack.prepare import redrive_from_postgres

    settings = running()
    print_json(redrive_from_postgres(settings, settings.admin_url, lambda _: None))


def prune() -> None:
    """Delete the history older than its retention (one pass, as the reconciliation worker runs
    every TOOLGATE_RETENTION_INTERVAL_SECONDS); prints how many rows each table lost."""
    from toolgate.ops.reconcile import prune_once

    print_json(prune_once(running()))
