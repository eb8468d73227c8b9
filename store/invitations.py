"""toolgate.console_invitations: one-time invitations an approver enrols from in the console.
`toolgate approvers invite` writes one (ops/invitations.py), holding only its token's sha256;
the console's enrol page reads it and takes it (burns it, with its token) in the transaction that
registers the approver (console/enrolment.py). The console's role may read invitations but not
change them: only `toolgate.take_invitation`, given the token itself, burns one (migration 0038)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection

INSERT = """
INSERT INTO toolgate.console_invitations (token_sha256, approver_id, tenants, groups, risk_classes, created_by,
    expires_at)
VALUES (%s, %s, %s, %s, %s, %s, now() + make_interval(secs => %s))
RETURNING expires_at
"""
# The invitation of a token, burnt if it may still be used; no row if not (migration 0038).
TAKE = "SELECT * FROM toolgate.take_invitation(%s)"
READ = """
SELECT approver_id, tenants, groups, risk_classes, expires_at, used_at, now()
FROM toolgate.console_invitations WHERE token_sha256 = %s
"""


@dataclass(frozen=True, slots=True)
class Invitation:
    """An invitation as enrolment judges it (console/invitation_check.py), with the server's
    time it was read at."""

    approver_id: str
    tenants: list[str]
    groups: list[str]
    risk_classes: list[str]
    expires_at: dt.datetime
    used_at: dt.datetime | None
    now: dt.datetime


async def insert(
    conn: AsyncConnection[Any],
    token_sha256: bytes,
    approver_id: str,
    tenants: list[str],
    groups: list[str],
    risk_classes: list[str],
    created_by: str,
    valid_for_s: float,
) -> dt.datetime:
    """Write an invitation valid for `valid_for_s` seconds; its expiry."""
    params = (token_sha256, approver_id, tenants, groups, risk_classes, created_by, valid_for_s)
    row = await (await conn.execute(INSERT, params)).fetchone()
    assert row is not None
    return row[0]  # type: ignore[no-any-return]


async def read(conn: AsyncConnection[Any], token_sha256: bytes) -> Invitation | None:
    """The invitation of this token's hash; None: no such invitation."""
    row = await (await conn.execute(READ, (token_sha256,))).fetchone()
    return None if row is None else Invitation(*row)


async def take(conn: AsyncConnection[Any], token: str) -> Invitation | None:
    """Burn the invitation of `token` and return it as it stood, if it is known, unused and
    unexpired (by the database's clock); None if not (`read` says why)."""
    row = await (await conn.execute(TAKE, (token,))).fetchone()
    return None if row is None else Invitation(*row)
