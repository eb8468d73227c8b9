"""Reaching people: `webhooks set|remove|list|deliveries`, a tenant's endpoint for its approval
tickets' events (signed, retried, audited: ops/webhooks.py, workers/webhooks/)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from toolgate.cli.common import console, literal, print_rows, registry_call, running

webhooks_app = typer.Typer(
    no_args_is_help=True,
    help="Webhooks: a tenant's endpoint hears of its approval tickets opening, gathering votes and closing.",
)


@webhooks_app.command("set")
def webhooks_set(tenant: str, url: str, actor: Annotated[str, typer.Option("--as")] = "operator") -> None:
    """Point a tenant's webhook at URL (and enable it), audited. Deliveries are POSTed as JSON,
    signed with the deployment key in the Standard Webhooks form (`webhook-signature: v1a,...`)."""
    from toolgate.ops.webhooks import set_webhook

    endpoint = registry_call(set_webhook, running(), tenant, url, actor)
    console.print(literal(f"tenant {tenant}'s webhook posts to {endpoint} (its path and query are kept, not shown)"))


@webhooks_app.command("remove")
def webhooks_remove(tenant: str, actor: Annotated[str, typer.Option("--as")] = "operator") -> None:
    """Remove a tenant's webhook, audited; deliveries still pending are dropped."""
    from toolgate.ops.webhooks import remove_webhook

    removed = registry_call(remove_webhook, running(), tenant, actor)
    console.print(f"tenant {tenant}'s webhook removed" if removed else f"tenant {tenant} has no webhook")


@webhooks_app.command("list")
def webhooks_list(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Every tenant's webhook: its origin (never its path or query) and whether it is enabled."""
    from toolgate.ops.webhooks import list_webhooks

    print_rows(list_webhooks(running()), as_json, _webhook_line, empty="no webhooks")


def _webhook_line(r: dict[str, Any]) -> str:
    state = "enabled" if r["enabled"] else "disabled (the receiver answered 410 Gone: set it again)"
    return f"{r['tenant']}  {r['endpoint']}  {state}  since {r['updated_at']}"


@webhooks_app.command("deliveries")
def webhooks_deliveries(
    tenant: Annotated[str | None, typer.Option(help="only this tenant's")] = None,
    status: Annotated[str | None, typer.Option(help="pending, delivered, failed or dropped")] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000)] = 50,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """The latest deliveries, newest first: event, ticket, status, attempts, how the last ended."""
    from toolgate.ops.webhooks import list_deliveries

    rows = registry_call(list_deliveries, running(), tenant, status, limit)
    print_rows(rows, as_json, _delivery_line, empty="no deliveries")


def _delivery_line(r: dict[str, Any]) -> str:
    line = f"{r['delivery']}  {r['tenant']}  {r['event']}  {r['approval']}  {r['status']}  attempts {r['attempts']}"
    return line + (f"  ({r['last_outcome']})" if r["last_outcome"] else "")
