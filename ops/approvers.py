"""Operator commands for approvers: who may sign decisions, with which key, for which tenants
and risks, and as which users (an approver is never counted on a call one of them requested).

An approver is registered once (`approvers add`), for one or more registered tenants: its
decisions count only on those tenants' tickets (workers/approval/decision.py, and execution's
own count). It is linked to the user ids it acts as (`--acts-as`, changed with `approvers
acts-as`): its decisions never count on a call one of them requested. A second `add` of the same
id is refused, whether the approver is active or revoked. A key is replaced only on purpose
(`approvers rotate`), and so are the set of tenants (`approvers tenants`) and of users, active
approvers only; a revocation is final: a revoked approver is never
made active again (register a new id). Every change is written to the hash-chained audit log in
the same transaction as the change itself, by the tables' owner (`admin_url`): workers may only
read approvers. Postgres holds public keys only; private keys go to the local keyring.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from toolgate.ops.registry import RegistryError, as_listed, in_transaction, read
from toolgate.settings import Settings
from toolgate.states import RegistryStatus
from toolgate.store import approvers, audit
from toolgate.store import tenants as registry
from toolgate.trust.agent_keys import check_name, key_id_of
from toolgate.trust.signing import Keyring, new_key, public_bytes

STAGE = "registry"


async def served_tenants(conn: psycopg.AsyncConnection[Any], tenants: list[str]) -> list[str]:
    """The tenants an approver is to serve, sorted: at least one, each registered."""
    if not tenants:
        raise RegistryError("an approver serves at least one tenant: name each with --tenant")
    unknown = sorted(set(tenants) - await registry.registered(conn, sorted(set(tenants))))
    if unknown:
        raise RegistryError(f"tenant {', '.join(unknown)} is not registered; run `toolgate tenants add` first")
    return sorted(set(tenants))


def _users(users: list[str]) -> list[str]:
    """The user ids an approver acts as, sorted: each as proposals name it (no blanks, no control
    characters, at most 256 characters)."""
    for user in users:
        if not user or len(user) > 256 or any(c.isspace() or not c.isprintable() for c in user):
            raise RegistryError(f"{user!r} is not a user id: 1 to 256 printable characters, no spaces")
    return sorted(set(users))


def _already(approver: str, status: str) -> RegistryError:
    hint = "`toolgate approvers rotate` replaces its key" if status == RegistryStatus.ACTIVE else "register a new id"
    return RegistryError(f"approver {approver} is already registered ({status}); {hint}")


def _entry(action: str, actor: str, approver: str, **detail: Any) -> audit.Entry:
    return audit.Entry(STAGE, action, actor, None, None, {"approver": approver, **detail})


@dataclass(frozen=True)
class Grant:
    """What a new approver is registered for: the risk classes it may approve, the approver
    groups it is in, the tenants it decides for (at least one) and the user ids it acts as."""

    risk_classes: list[str]
    groups: list[str]
    tenants: list[str]
    acts_as: list[str] = field(default_factory=list)


def register_approver(
    database_url: str, approver: str, public_key: bytes, grant: Grant, actor: str = "operator"
) -> str:
    """Record a new approver's public key, the tenants it decides for and the users it acts as
    (audited); refuses an id already registered, and an approver of no tenant or of one not
    registered. Returns the key id."""
    check_name("approver", approver)

    async def work(conn: psycopg.AsyncConnection[Any]) -> str:
        return await record_approver(conn, approver, public_key, grant, actor)

    return in_transaction(database_url, work)


async def record_approver(
    conn: psycopg.AsyncConnection[Any], approver: str, public_key: bytes, grant: Grant, actor: str
) -> str:
    """`register_approver`'s work on `conn`, in the caller's transaction (the console's enrolment
    burns its invitation in the same one); the key id."""
    check_name("approver", approver)
    key_id = key_id_of(public_key)
    users = _users(grant.acts_as)
    status = await approvers.status(conn, approver)
    if status is not None:
        raise _already(approver, status)
    served = await served_tenants(conn, grant.tenants)
    if not await approvers.insert(conn, approver, public_key, grant.risk_classes, grant.groups, served, users):
        raise _already(approver, "registered")  # registered meanwhile
    detail = {
        "key_id": key_id,
        "risk_classes": sorted(grant.risk_classes),
        "groups": sorted(grant.groups),
        "tenants": served,
        "acts_as": users,
    }
    await audit.append(conn, [_entry("approver_registered", actor, approver, **detail)])
    return key_id


def add_approver(settings: Settings, approver: str, grant: Grant, actor: str = "operator") -> Path:
    """Register a new approver with a new key pair; returns where its private key is."""
    keyring = Keyring(settings.home / "approvers")
    keyring.path(approver)  # a bad id fails before anything is written
    key = new_key()
    public_key = public_bytes(key)
    register_approver(settings.admin_url, approver, public_key, grant, actor)
    return keyring.store(approver, key)


def rotate_approver(settings: Settings, approver: str, actor: str = "operator") -> tuple[str, Path]:
    """Give an active approver a new key (the old one stops verifying at once); returns the new
    key id and where its private key is."""
    keyring = Keyring(settings.home / "approvers")
    keyring.path(approver)
    key = new_key()
    public_key = public_bytes(key)

    async def work(conn: psycopg.AsyncConnection[Any]) -> None:
        row = await approvers.current(conn, approver)
        if row is None or row.status != RegistryStatus.ACTIVE:
            raise RegistryError(f"no active approver {approver}")
        await approvers.rotate(conn, approver, public_key)
        detail = {"key_id": key_id_of(public_key), "previous_key_id": key_id_of(bytes(row.public_key))}
        await audit.append(conn, [_entry("approver_key_rotated", actor, approver, **detail)])

    in_transaction(settings.admin_url, work)
    return key_id_of(public_key), keyring.store(approver, key)


def serve(settings: Settings, approver: str, tenants: list[str], actor: str = "operator") -> list[str]:
    """Set the tenants an active approver decides for (audited); its decisions on another
    tenant's tickets stop counting at once, even those already made. Returns them."""

    async def apply(conn: psycopg.AsyncConnection[Any]) -> list[str]:
        served = await served_tenants(conn, tenants)
        await approvers.serve(conn, approver, served)
        return served

    return _change(settings, approver, actor, "tenants", apply)


def act_as(settings: Settings, approver: str, users: list[str], actor: str = "operator") -> list[str]:
    """Set the user ids an active approver acts as (audited; none: it acts as no one); its
    decisions on a call one of them requested stop counting at once, even those already made
    (execution's own count). Returns them."""
    named = _users(users)

    async def apply(conn: psycopg.AsyncConnection[Any]) -> list[str]:
        await approvers.act_as(conn, approver, named)
        return named

    return _change(settings, approver, actor, "acts_as", apply)


def _change(
    settings: Settings,
    approver: str,
    actor: str,
    field: str,
    apply: Callable[[psycopg.AsyncConnection[Any]], Awaitable[list[str]]],
) -> list[str]:
    """One list of an active approver's (`field`: tenants, acts_as) set by `apply` in one
    transaction, audited as `approver_<field>_changed` with the list before and after."""

    async def work(conn: psycopg.AsyncConnection[Any]) -> list[str]:
        row = await approvers.current(conn, approver)
        if row is None or row.status != RegistryStatus.ACTIVE:
            raise RegistryError(f"no active approver {approver}")
        after = await apply(conn)
        detail = {
            "key_id": key_id_of(bytes(row.public_key)),
            field: after,
            f"previous_{field}": sorted(getattr(row, field)),
        }
        await audit.append(conn, [_entry(f"approver_{field}_changed", actor, approver, **detail)])
        return after

    return in_transaction(settings.admin_url, work)


def revoke_approver(settings: Settings, approver: str, actor: str = "operator") -> bool:
    """Revoke an approver (audited): its decisions stop counting at once. False if there was no
    active approver of that id."""

    async def work(conn: psycopg.AsyncConnection[Any]) -> bool:
        row = await approvers.current(conn, approver)
        if row is None or row.status != RegistryStatus.ACTIVE:
            return False
        await approvers.revoke(conn, approver)
        detail = {"key_id": key_id_of(bytes(row.public_key))}
        await audit.append(conn, [_entry("approver_revoked", actor, approver, **detail)])
        return True

    return in_transaction(settings.admin_url, work)


def list_approvers(settings: Settings) -> list[dict[str, Any]]:
    """Every approver as `approvers list` shows it: its key by id only, in the key's place."""
    rows = read(settings.database_url, approvers.listed)
    return [
        as_listed(r, approver_id="approver", public_key="key_id") | {"key_id": key_id_of(bytes(r.public_key))}
        for r in rows
    ]
