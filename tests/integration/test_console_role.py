"""The approval console's role on the real Postgres (migration 0038, ops/roles.py): connected as
`toolgate_console`, the console changes nothing that decides a call (tickets, decisions, keys,
policy sets, the outbox, the audit log's past), burns an invitation only with its token, and adds
an approver only in the transaction that burnt its invitation, with no more than it grants;
enrolment itself (store/invitations.py `take`, ops/approvers.py `record_approver`) works as that
role, audited."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import psycopg
import pytest

from toolgate.console.state import digest
from toolgate.ops.approvers import Grant, record_approver
from toolgate.ops.roles import CONSOLE_ROLE
from toolgate.store import invitations
from toolgate.trust.signing import new_key, public_bytes

from .conftest import Database

KEY = public_bytes(new_key())


def invited(database: Database, approver: str, tenants: list[str] = ["acme"]) -> str:  # noqa: B006
    """A fresh invitation for `approver`, written as an operator's `approvers invite` does; its token."""
    token = f"tok-{uuid.uuid4().hex}"
    database.sql(
        "INSERT INTO toolgate.console_invitations (token_sha256, approver_id, tenants, groups, risk_classes, "
        "created_by, expires_at) "
        "VALUES (%s, %s, %s, '{}', '{HIGH_RISK_EXTERNAL}', 'operator', now() + interval '1 hour')",
        (digest(token), approver, tenants),
    )
    return token


def as_console(database: Database, statement: str, params: Any = None) -> None:
    """Run `statement` in a transaction of its own as the console's role."""
    with psycopg.connect(database.database_url) as conn, conn.transaction():
        conn.execute(f"SET LOCAL ROLE {CONSOLE_ROLE}")
        conn.execute(statement, params)


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE toolgate.approvals SET status = 'APPROVED'",
        "INSERT INTO toolgate.approval_decisions (decision_id, approval_id, approver_id, verdict) "
        "VALUES ('d', 'a', 'alice', 'APPROVE')",
        "UPDATE toolgate.approvers SET public_key = '\\x00'",
        "DELETE FROM toolgate.approvers",
        "INSERT INTO toolgate.policy_deployments (role, digest, files, deployed_by, key_id, signature) "
        "VALUES ('enforcing', 'd', '{}', 'x', 'k', '\\x00')",
        "INSERT INTO toolgate.outbox (topic, partition, kind, key, payload, headers) "
        "VALUES ('t', 0, 'k', '\\x00', '\\x00', '[]')",
        "UPDATE toolgate.idempotency_keys SET status = 'COMPLETED'",
        "UPDATE toolgate.audit_log SET actor = 'x'",
        "DELETE FROM toolgate.audit_log",
        "UPDATE toolgate.console_invitations SET used_at = now()",
        "INSERT INTO toolgate.tenants (tenant_id) VALUES ('evil')",
    ],
)
def test_the_console_role_changes_nothing_that_decides_a_call(database: Database, statement: str) -> None:
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        as_console(database, statement)


def test_the_console_role_adds_no_approver_without_burning_its_invitation(database: Database) -> None:
    approver = f"ivy-{uuid.uuid4().hex[:6]}"
    insert = (
        "INSERT INTO toolgate.approvers (approver_id, public_key, risk_classes, tenants) "
        "VALUES (%s, %s, '{HIGH_RISK_EXTERNAL}', '{acme}')"
    )
    with pytest.raises(psycopg.errors.InsufficientPrivilege):  # no invitation at all
        as_console(database, insert, (approver, KEY))
    token = invited(database, approver)
    with pytest.raises(psycopg.errors.InsufficientPrivilege):  # invited, not burnt
        as_console(database, insert, (approver, KEY))
    with psycopg.connect(database.database_url) as conn, conn.transaction():  # burnt, then committed
        conn.execute(f"SET LOCAL ROLE {CONSOLE_ROLE}")
        assert conn.execute("SELECT approver_id FROM toolgate.take_invitation(%s)", (token,)).fetchall() == [
            (approver,)
        ]
    with pytest.raises(psycopg.errors.InsufficientPrivilege):  # burnt in another transaction
        as_console(database, insert, (approver, KEY))
    assert database.sql("SELECT count(*) FROM toolgate.approvers WHERE approver_id = %s", (approver,)) == [(0,)]


def test_the_console_role_grants_no_more_than_the_invitation(database: Database) -> None:
    approver = f"ivy-{uuid.uuid4().hex[:6]}"
    token = invited(database, approver)
    wider = [
        "'{HIGH_RISK_EXTERNAL}', '{acme,globex}', '{}', '{}', 'active'",  # a tenant not granted
        "'{CRITICAL_MUTATION}', '{acme}', '{}', '{}', 'active'",  # a risk class not granted
        "'{HIGH_RISK_EXTERNAL}', '{acme}', '{finance}', '{}', 'active'",  # a group not granted
        "'{HIGH_RISK_EXTERNAL}', '{acme}', '{}', '{someone}', 'active'",  # acting as a user
    ]
    for values in wider:
        with psycopg.connect(database.database_url) as conn, conn.transaction():
            conn.execute(f"SET LOCAL ROLE {CONSOLE_ROLE}")
            conn.execute("SELECT * FROM toolgate.take_invitation(%s)", (token,))
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(
                    "INSERT INTO toolgate.approvers (approver_id, public_key, risk_classes, tenants, groups, "
                    f"acts_as, status) VALUES (%s, %s, {values})",
                    (approver, KEY),
                )
            raise psycopg.Rollback()  # the invitation is unburnt again
    assert database.sql("SELECT used_at FROM toolgate.console_invitations WHERE token_sha256 = %s", (digest(token),))[
        0
    ] == (None,)


def test_an_approver_enrols_from_an_invitation_as_the_console_role(database: Database) -> None:
    approver = f"ivy-{uuid.uuid4().hex[:6]}"
    token = invited(database, approver)

    async def enrol() -> tuple[Any, Any]:
        async with await psycopg.AsyncConnection.connect(database.database_url) as conn, conn.transaction():
            await conn.execute(f"SET LOCAL ROLE {CONSOLE_ROLE}")
            found = await invitations.take(conn, token)
            assert found is not None
            grant = Grant(found.risk_classes, found.groups, found.tenants)
            await record_approver(conn, found.approver_id, KEY, grant, "invitation:test")
            return found, await invitations.take(conn, token)

    found, again = asyncio.run(enrol())
    assert found.approver_id == approver and again is None  # one enrolment a token
    assert database.sql(
        "SELECT status, tenants, risk_classes FROM toolgate.approvers WHERE approver_id = %s", (approver,)
    ) == [("active", ["acme"], ["HIGH_RISK_EXTERNAL"])]
    assert database.sql(
        "SELECT actor FROM toolgate.audit_log WHERE action = 'approver_registered' AND detail->>'approver' = %s",
        (approver,),
    ) == [("invitation:test",)]
