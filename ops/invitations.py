"""`toolgate approvers invite`: a one-time, expiring invitation an approver enrols from in the
console (console/enrolment.py), where the browser makes the approver's key and only its public
half is registered.

The token is 32 random bytes, printed once in the enrol URL; Postgres holds only its sha256
(store/invitations.py). The invitation names the approver, the tenants (each registered), the
groups and risk classes it is granted and the users it acts as; it is audited like every other
change to approvers (`approver_invited`, with the token's hash prefix, never the token)."""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import secrets
from dataclasses import dataclass
from typing import Any

import psycopg

from toolgate.ops.approvers import served_tenants
from toolgate.ops.registry import RegistryError, in_transaction, utc_text
from toolgate.settings import Settings
from toolgate.store import audit, invitations
from toolgate.trust.agent_keys import check_name

DURATION = re.compile(r"^(\d+)([smhd])$")
UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}
LONGEST_S = 7 * 86400


def token_hash(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def duration_s(text: str) -> int:
    """`24h`, `30m`, `2d`, `90s` in seconds: at least a minute, at most a week."""
    found = DURATION.match(text.strip())
    if found is None:
        raise RegistryError(f"{text!r} is not a duration: a number and s, m, h or d (24h)")
    seconds = int(found[1]) * UNIT_S[found[2]]
    if not 60 <= seconds <= LONGEST_S:
        raise RegistryError(f"an invitation is valid for a minute to a week, not {text}")
    return seconds


@dataclass(frozen=True)
class Invited:
    """What `approvers invite` prints: the enrol URL (the token in it, shown this once) and when
    it expires."""

    url: str
    expires_at: str


def invite(
    settings: Settings,
    approver: str,
    tenants: list[str],
    groups: list[str],
    risk_classes: list[str],
    valid_for: str = "24h",
    actor: str = "operator",
    console_url: str = "",
) -> Invited:
    """Write an invitation for `approver` (audited); the URL to give it, once: under `console_url`,
    else the console's address as approvers reach it (settings `console_url`, which `toolgate up`
    sets to the console it started unless TOOLGATE_CONSOLE_URL names another)."""
    check_name("approver", approver)
    base = console_url or settings.console_url
    if not base:
        raise RegistryError("no console is running here (`toolgate up` starts one): name its URL with --console-url")
    seconds = duration_s(valid_for)
    token = secrets.token_urlsafe(32)
    digest = token_hash(token)

    async def work(conn: psycopg.AsyncConnection[Any]) -> dt.datetime:
        served = await served_tenants(conn, tenants)
        named = sorted({g for g in groups if g})
        classes = sorted({c for c in risk_classes if c})
        expires = await invitations.insert(conn, digest, approver, served, named, classes, actor, seconds)
        detail = {"approver": approver, "tenants": served, "groups": named, "risk_classes": classes}
        detail |= {"token_sha256_prefix": digest.hex()[:12], "expires_at": utc_text(expires)}
        await audit.append(conn, [audit.Entry("registry", "approver_invited", actor, None, None, detail)])
        return expires

    expires = in_transaction(settings.admin_url, work)
    return Invited(f"{base.rstrip('/')}/enrol#{token}", utc_text(expires))
