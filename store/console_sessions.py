"""toolgate.console_sessions and toolgate.console_challenges: the console's logins
(console/app.py, console/auth.py). A challenge is issued, then taken once before its expiry by
the login that signed it; a session row names its approver, its CSRF token and its expiry, keyed
by the sha256 of the cookie's value (the value itself is never stored)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection

ISSUE = "INSERT INTO toolgate.console_challenges (challenge, expires_at) VALUES (%s, now() + make_interval(secs => %s))"
# A challenge is taken once: deleted whether or not it is still valid, valid only before its expiry.
TAKE = "DELETE FROM toolgate.console_challenges WHERE challenge = %s RETURNING expires_at > now()"
PRUNE = "DELETE FROM toolgate.console_challenges WHERE expires_at < now() - interval '1 hour'"
OPEN = """
INSERT INTO toolgate.console_sessions (session_sha256, approver_id, csrf_token, expires_at)
VALUES (%s, %s, %s, now() + make_interval(secs => %s))
"""
SESSION = """
SELECT s.approver_id, s.csrf_token, s.expires_at, now(), coalesce(a.status = 'active', false)
FROM toolgate.console_sessions s LEFT JOIN toolgate.approvers a USING (approver_id)
WHERE s.session_sha256 = %s
"""
CLOSE = "DELETE FROM toolgate.console_sessions WHERE session_sha256 = %s"
EXPIRE = "UPDATE toolgate.console_sessions SET expires_at = now() - interval '1 second' WHERE approver_id = %s"


@dataclass(frozen=True, slots=True)
class Session:
    """A session as the console judges it (console/auth.py): whose, its CSRF token, its expiry,
    the server's time it was read at, and whether its approver is still active."""

    approver_id: str
    csrf_token: str
    expires_at: dt.datetime
    now: dt.datetime
    approver_active: bool


async def issue_challenge(conn: AsyncConnection[Any], challenge: bytes, valid_for_s: float) -> None:
    await conn.execute(PRUNE)
    await conn.execute(ISSUE, (challenge, valid_for_s))


async def take_challenge(conn: AsyncConnection[Any], challenge: bytes) -> bool:
    """Whether the challenge was issued and is unexpired; it is gone afterwards either way."""
    row = await (await conn.execute(TAKE, (challenge,))).fetchone()
    return row is not None and bool(row[0])


async def open_session(
    conn: AsyncConnection[Any], session_sha256: bytes, approver_id: str, csrf_token: str, valid_for_s: float
) -> None:
    await conn.execute(OPEN, (session_sha256, approver_id, csrf_token, valid_for_s))


async def session(conn: AsyncConnection[Any], session_sha256: bytes) -> Session | None:
    row = await (await conn.execute(SESSION, (session_sha256,))).fetchone()
    return None if row is None else Session(*row)


async def close_session(conn: AsyncConnection[Any], session_sha256: bytes) -> None:
    await conn.execute(CLOSE, (session_sha256,))


async def expire_sessions(conn: AsyncConnection[Any], approver_id: str) -> None:
    """End every session of an approver now (the tests' expired session; an operator's lever)."""
    await conn.execute(EXPIRE, (approver_id,))
