"""Operator commands for a tenant's webhook (issue 52, part 6): `toolgate webhooks set|remove|list`
and `toolgate webhooks deliveries`.

A tenant has at most one endpoint. Setting it (again) enables it; removing it drops the deliveries
still pending at their next attempt (audited as dropped). Each change is audited with the
endpoint's origin only, never its path or query: a chat tool's incoming-webhook URL carries its
credential there. `list` shows origins the same way; the URL itself stays in Postgres.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import psycopg

from toolgate.ops.registry import RegistryError, as_listed, in_transaction, read, utc_text
from toolgate.settings import Settings
from toolgate.store import audit, tenants, webhooks
from toolgate.workers.webhooks.delivery import origin

STAGE = "registry"
STATUSES = ("pending", "delivered", "failed", "dropped")


def checked_url(url: str) -> str:
    """`url` if a courier can post to it: http or https, with a host, and no user or password
    (a credential belongs in the path or query the endpoint issued, not in the authority)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RegistryError(f"{origin(url) or 'the URL'} is not an http(s) URL with a host")
    if parts.username or parts.password:
        raise RegistryError("a webhook URL carries no user or password before its host")
    return url


def set_webhook(settings: Settings, tenant: str, url: str, actor: str = "operator") -> str:
    """Point `tenant`'s webhook at `url` and enable it (audited); returns its origin."""
    wanted = checked_url(url)

    async def work(conn: psycopg.AsyncConnection[Any]) -> str:
        if not await tenants.registered(conn, [tenant]):
            raise RegistryError(f"tenant {tenant} is not registered; run `toolgate tenants add {tenant}` first")
        before = await webhooks.locked(conn, tenant)
        await webhooks.upsert(conn, tenant, wanted)
        detail = {"endpoint": origin(wanted), "previous_endpoint": None if before is None else origin(before[0])}
        await audit.append(conn, [audit.Entry(STAGE, "webhook_set", actor, None, tenant, detail)])
        return origin(wanted)

    return in_transaction(settings.admin_url, work)


def remove_webhook(settings: Settings, tenant: str, actor: str = "operator") -> bool:
    """Remove `tenant`'s webhook (audited); False if it had none."""

    async def work(conn: psycopg.AsyncConnection[Any]) -> bool:
        before = await webhooks.locked(conn, tenant)
        if before is None:
            return False
        await webhooks.delete(conn, tenant)
        detail = {"endpoint": origin(before[0])}
        await audit.append(conn, [audit.Entry(STAGE, "webhook_removed", actor, None, tenant, detail)])
        return True

    return in_transaction(settings.admin_url, work)


def list_webhooks(settings: Settings) -> list[dict[str, Any]]:
    rows = read(settings.database_url, webhooks.listed)
    return [
        {"tenant": r.tenant_id, "endpoint": origin(r.url), "enabled": r.enabled, "updated_at": utc_text(r.updated_at)}
        for r in rows
    ]


def list_deliveries(settings: Settings, tenant: str | None, status: str | None, limit: int) -> list[dict[str, Any]]:
    if status is not None and status not in STATUSES:
        raise RegistryError(f"status {status!r} is not one of {', '.join(STATUSES)}")
    rows = read(settings.database_url, webhooks.deliveries, tenant, status, limit)
    names = {"delivery_id": "delivery", "tenant_id": "tenant", "event_type": "event", "approval_id": "approval"}
    return [as_listed(r, **names) | {"due_at": utc_text(r.due_at) if r.status == "pending" else None} for r in rows]
