"""What the operator commands on the registries share (tenants and agents, agent tokens,
approvers, approvals, webhooks): the refusal they answer with, one transaction for a change and
its audit rows, and a store's row and a timestamp as their listings show them."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Awaitable, Callable
from dataclasses import fields
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

import psycopg

from toolgate.schemas.errors import PermanentError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T")
P = ParamSpec("P")


class RegistryError(PermanentError):
    """An operator's request the registry refuses (said plainly, not a stack trace)."""


def in_transaction(database_url: str, work: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]]) -> T:
    """Run `work` in one transaction: whatever it raises rolls back everything it wrote."""

    async def run() -> T:
        async with await psycopg.AsyncConnection.connect(database_url) as conn, conn.transaction():
            return await work(conn)

    return asyncio.run(run())


def read(
    database_url: str, query: Callable[Concatenate[psycopg.Connection[Any], P], T], *args: P.args, **kwargs: P.kwargs
) -> T:
    """One of a store's reads, on a connection of its own closed after it."""
    with psycopg.connect(database_url) as conn:
        return query(conn, *args, **kwargs)


def utc_text(at: dt.datetime) -> str:
    """A registry's timestamp as the operators' listings show it, in UTC."""
    return at.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def as_listed(row: DataclassInstance, **names: str) -> dict[str, Any]:
    """A store's row as the operators' listings show it (`--json` prints it as it is): each field
    in order, under its own name or the one `names` gives it; a timestamp as `utc_text` writes it."""
    return {names.get(f.name, f.name): _value(getattr(row, f.name)) for f in fields(row)}


def _value(value: Any) -> Any:
    return utc_text(value) if isinstance(value, dt.datetime) else value
