"""Operator commands for approvers: who may sign decisions, with which key, for which risks.

An approver is registered once (`approvers add`): a second `add` of the same id is refused,
whether the approver is active or revoked. A key is replaced only on purpose (`approvers
rotate`, active approvers only), and a revocation is final: a revoked approver is never made
active again (register a new id). Every change is written to the hash-chained audit log in the
same transaction as the change itself, by the tables' owner (`admin_url`): workers may only
read approvers. Postgres holds public keys only; private keys go to the local keyring.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import psycopg

from toolgate.agent_keys import check_name, key_id_of
from toolgate.ops.agents import RegistryError
from toolgate.settings import Settings
from toolgate.signing import Keyring, new_key, public_bytes
from toolgate.states import RegistryStatus
from toolgate.workers.runtime import audit

STAGE = "registry"
T = TypeVar("T")

INSERT = """
INSERT INTO toolgate.approvers (approver_id, public_key, risk_classes, groups) VALUES (%s, %s, %s, %s)
ON CONFLICT (approver_id) DO NOTHING RETURNING approver_id
"""
CURRENT = "SELECT status, public_key FROM toolgate.approvers WHERE approver_id = %s FOR UPDATE"
ROTATE = "UPDATE toolgate.approvers SET public_key = %s WHERE approver_id = %s AND status = 'active'"
REVOKE = "UPDATE toolgate.approvers SET status = 'revoked', revoked_at = now() WHERE approver_id = %s"


def _in_transaction(database_url: str, work: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]]) -> T:
    async def run() -> T:
        async with await psycopg.AsyncConnection.connect(database_url) as conn, conn.transaction():
            return await work(conn)

    return asyncio.run(run())


def _entry(action: str, actor: str, approver: str, **detail: Any) -> audit.Entry:
    return audit.Entry(STAGE, action, actor, None, None, {"approver": approver, **detail})


def register_approver(
    database_url: str,
    approver: str,
    public_key: bytes,
    risk_classes: list[str],
    groups: list[str],
    actor: str = "operator",
) -> str:
    """Record a new approver's public key (audited); refuses an id already registered. Returns
    the key id."""
    check_name("approver", approver)
    key_id = key_id_of(public_key)

    async def work(conn: psycopg.AsyncConnection[Any]) -> None:
        cur = await conn.execute(INSERT, (approver, public_key, risk_classes, groups))
        if await cur.fetchone() is None:
            cur = await conn.execute("SELECT status FROM toolgate.approvers WHERE approver_id = %s", (approver,))
            row = await cur.fetchone()
            status = row[0] if row else "registered"
            active = status == RegistryStatus.ACTIVE
            hint = "`toolgate approvers rotate` replaces its key" if active else "register a new id"
            raise RegistryError(f"approver {approver} is already registered ({status}); {hint}")
        detail = {"key_id": key_id, "risk_classes": sorted(risk_classes), "groups": sorted(groups)}
        await audit.append(conn, [_entry("approver_registered", actor, approver, **detail)])

    _in_transaction(database_url, work)
    return key_id


def add_approver(
    settings: Settings, approver: str, risk_classes: list[str], groups: list[str], actor: str = "operator"
) -> Path:
    """Register a new approver with a new key pair; returns where its private key is."""
    keyring = Keyring(settings.home / "approvers")
    keyring.path(approver)  # a bad id fails before anything is written
    key = new_key()
    register_approver(settings.admin_url, approver, public_bytes(key), risk_classes, groups, actor)
    return keyring.store(approver, key)


def rotate_approver(settings: Settings, approver: str, actor: str = "operator") -> tuple[str, Path]:
    """Give an active approver a new key (the old one stops verifying at once); returns the new
    key id and where its private key is."""
    keyring = Keyring(settings.home / "approvers")
    keyring.path(approver)
    key = new_key()
    public_key = public_bytes(key)

    async def work(conn: psycopg.AsyncConnection[Any]) -> None:
        cur = await conn.execute(CURRENT, (approver,))
        row = await cur.fetchone()
        if row is None or row[0] != RegistryStatus.ACTIVE:
            raise RegistryError(f"no active approver {approver}")
        await conn.execute(ROTATE, (public_key, approver))
        detail = {"key_id": key_id_of(public_key), "previous_key_id": key_id_of(bytes(row[1]))}
        await audit.append(conn, [_entry("approver_key_rotated", actor, approver, **detail)])

    _in_transaction(settings.admin_url, work)
    return key_id_of(public_key), keyring.store(approver, key)


def revoke_approver(settings: Settings, approver: str, actor: str = "operator") -> bool:
    """Revoke an approver (audited): its decisions stop counting at once. False if there was no
    active approver of that id."""

    async def work(conn: psycopg.AsyncConnection[Any]) -> bool:
        cur = await conn.execute(CURRENT, (approver,))
        row = await cur.fetchone()
        if row is None or row[0] != RegistryStatus.ACTIVE:
            return False
        await conn.execute(REVOKE, (approver,))
        detail = {"key_id": key_id_of(bytes(row[1]))}
        await audit.append(conn, [_entry("approver_revoked", actor, approver, **detail)])
        return True

    return _in_transaction(settings.admin_url, work)


def list_approvers(settings: Settings) -> list[dict[str, Any]]:
    with psycopg.connect(settings.database_url) as conn:
        rows = conn.execute(
            "SELECT approver_id, status, risk_classes, groups, created_at, public_key FROM toolgate.approvers "
            "ORDER BY approver_id"
        ).fetchall()
    return [
        {
            "approver": r[0],
            "status": r[1],
            "risk_classes": r[2],
            "groups": r[3],
            "created_at": r[4].astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
            "key_id": key_id_of(bytes(r[5])),
        }
        for r in rows
    ]
