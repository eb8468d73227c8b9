"""Operator commands for quarantined tool versions: `toolgate tools quarantine TOOL@VERSION
--reason ...`, `toolgate tools release TOOL@VERSION`, `toolgate tools quarantined`.

Execution quarantines a READ_ONLY tool version whose statement tried to write (the seeds'
mutation-class violation: "immediate quarantine until human review"); an operator may hold one
by hand too. While quarantined, policy refuses every call of it (POLICY_VIOLATION
tool_quarantined). Only an operator releases one, once the tool's contract or binding is
fixed or the finding understood. Each quarantine and release is written to the hash-chained
audit log, in the same transaction as the change.
"""

from __future__ import annotations

from typing import Any

import psycopg

from toolgate.contracts.registry import load_registry
from toolgate.ops.registry import RegistryError, in_transaction
from toolgate.settings import Settings
from toolgate.store import audit, quarantine

STAGE = "operator"


def version_of(settings: Settings, spec: str) -> quarantine.Version:
    """TOOL@VERSION as a registered tool version, or a RegistryError saying why not."""
    name, at, version = spec.partition("@")
    if not at or not name or not version:
        raise RegistryError(f"name a tool version as TOOL@VERSION (e.g. invoice.fetch@1.0.0), not {spec!r}")
    if not any(c.name == name and c.version == version for c in load_registry(settings.contracts_dir)):
        raise RegistryError(f"no contract registers {name} {version}; `toolgate contracts list` names those that do")
    return name, version


def hold(settings: Settings, spec: str, reason: str, actor: str = "operator") -> bool:
    """Quarantine a tool version; False: it already was (it keeps its first reason)."""
    if not reason.strip():
        raise RegistryError("say why the tool version is quarantined (--reason)")
    name, version = version_of(settings, spec)

    async def work(conn: psycopg.AsyncConnection[Any]) -> bool:
        held = quarantine.Quarantine(name, version, reason, actor)
        if not await quarantine.hold_one(conn, held):
            return False
        detail = {"tool": name, "version": version, "reason": reason}
        await audit.append(conn, [audit.Entry(STAGE, "tool_quarantined", actor, None, None, detail)])
        return True

    return in_transaction(settings.admin_url, work)


def release(settings: Settings, spec: str, actor: str = "operator") -> quarantine.Quarantine:
    """Release a quarantined tool version: its calls run again. Returns the quarantine it had."""
    name, version = version_of(settings, spec)

    async def work(conn: psycopg.AsyncConnection[Any]) -> quarantine.Quarantine:
        released = await quarantine.release(conn, (name, version))
        if released is None:
            raise RegistryError(f"{name} {version} is not quarantined")
        detail = {"tool": name, "version": version, "reason": released.reason, "quarantined_by": released.actor}
        if released.call_id is not None:
            detail["call_id"] = released.call_id
        await audit.append(conn, [audit.Entry(STAGE, "tool_released", actor, None, released.tenant_id, detail)])
        return released

    return in_transaction(settings.admin_url, work)


def held(settings: Settings) -> list[quarantine.Quarantine]:
    """Every quarantined tool version."""

    async def work(conn: psycopg.AsyncConnection[Any]) -> list[quarantine.Quarantine]:
        return await quarantine.listed(conn)

    return in_transaction(settings.database_url, work)
