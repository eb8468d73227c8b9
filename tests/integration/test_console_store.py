"""The console's tables and notices on the real Postgres (migration 0031, store/invitations.py,
store/console_sessions.py, store/console_inbox.py): a ticket opened, decided or closed is a
notice on `toolgate_console` naming it; an invitation burns once; a challenge is taken once and
only before its expiry; a session ends at its expiry or with its approver; an inbox holds only
the tickets its approver may decide; a batch of changed tickets is told to the approvers who may
see them; the decisions that did not count on a ticket are read back
from the audit log, oldest first; a ticket's part in an edit reads the same on the console's
async connection as on `approvals show`'s (store/edits.py)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import psycopg

from toolgate.console.checks import invitation_refusal, session_alive
from toolgate.console.state import digest
from toolgate.store import approvers, audit, console_inbox, console_sessions, edits, invitations

from .conftest import Database
from .test_redrive import _ticket

T = TypeVar("T")


def run(database: Database, work: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]]) -> T:
    async def go() -> T:
        async with await psycopg.AsyncConnection.connect(database.settings.database_url, autocommit=True) as conn:
            return await work(conn)

    return asyncio.run(go())


def test_a_ticket_opened_decided_and_closed_is_a_notice_naming_it(database: Database) -> None:
    approval_id = f"appr_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(database.settings.database_url, autocommit=True) as listener:
        listener.execute("LISTEN toolgate_console")
        with psycopg.connect(database.settings.database_url, autocommit=True) as conn:
            _ticket(conn, approval_id, "APPROVED", None)  # the ticket, and a decision on it
            conn.execute("UPDATE toolgate.approvals SET consumed_by = 'op' WHERE approval_id = %s", (approval_id,))
            conn.execute("UPDATE toolgate.approvals SET status = 'DENIED' WHERE approval_id = %s", (approval_id,))
        heard = [n.payload for n in listener.notifies(timeout=2.0, stop_after=4)]
    assert heard == [approval_id] * 3  # execution's mark (consumed_by) is no notice


def test_an_invitation_burns_once(database: Database) -> None:
    token = f"tok-{uuid.uuid4().hex}"

    async def work(conn: psycopg.AsyncConnection[Any]) -> tuple[Any, ...]:
        hashed = digest(token)
        await invitations.insert(conn, hashed, "ivy", ["acme"], ["g"], ["HIGH_RISK_EXTERNAL"], "operator", 60)
        fresh = await invitations.read(conn, hashed)
        first, second = await invitations.take(conn, token), await invitations.take(conn, token)
        used = await invitations.read(conn, hashed)
        return fresh, first, second, used, await invitations.read(conn, b"\0" * 32)

    fresh, first, second, used, unknown = run(database, work)
    assert fresh is not None and invitation_refusal(fresh, fresh.now) is None
    assert (fresh.approver_id, fresh.tenants, fresh.groups) == ("ivy", ["acme"], ["g"])
    assert first is not None and first.approver_id == "ivy" and second is None
    assert used is not None and invitation_refusal(used, used.now) == "this invitation has been used already"
    assert unknown is None


def test_a_challenge_is_taken_once_and_only_before_its_expiry(database: Database) -> None:
    live, stale = uuid.uuid4().bytes, uuid.uuid4().bytes

    async def work(conn: psycopg.AsyncConnection[Any]) -> list[bool]:
        await console_sessions.issue_challenge(conn, live, 60)
        await console_sessions.issue_challenge(conn, stale, -1)
        return [
            await console_sessions.take_challenge(conn, live),
            await console_sessions.take_challenge(conn, live),
            await console_sessions.take_challenge(conn, stale),
        ]

    assert run(database, work) == [True, False, False]


def test_a_session_ends_at_its_expiry_or_with_its_approver(database: Database) -> None:
    name, cookie = f"sess-{uuid.uuid4().hex[:6]}", uuid.uuid4().bytes

    async def work(conn: psycopg.AsyncConnection[Any]) -> list[bool]:
        await approvers.insert(conn, name, bytes(32), ["HIGH_RISK_EXTERNAL"], [], ["acme"], [])
        await console_sessions.open_session(conn, cookie, name, "csrf", 60)
        seen = [await console_sessions.session(conn, cookie)]
        await approvers.revoke(conn, name)
        seen.append(await console_sessions.session(conn, cookie))
        await console_sessions.expire_sessions(conn, name)
        seen.append(await console_sessions.session(conn, cookie))
        await console_sessions.close_session(conn, cookie)
        seen.append(await console_sessions.session(conn, cookie))
        return [session_alive(s, s.now) if s is not None else False for s in seen]

    assert run(database, work) == [True, False, False, False]


def test_an_inbox_holds_the_tickets_its_approver_may_decide(database: Database) -> None:
    tag = uuid.uuid4().hex[:6]
    approval_id, mine, other = f"appr_{tag}inbox", f"acme-{tag}", f"globex-{tag}"
    with psycopg.connect(database.settings.database_url, autocommit=True) as conn:
        _ticket(conn, approval_id, "PENDING", None)

    async def work(conn: psycopg.AsyncConnection[Any]) -> list[list[str]]:
        await approvers.insert(conn, mine, bytes(32), ["HIGH_RISK_EXTERNAL"], [], ["acme"], [])
        await approvers.insert(conn, other, bytes(32), ["HIGH_RISK_EXTERNAL"], [], ["globex"], [])
        seen = [[w.approval_id for w in await console_inbox.inbox(conn, who)] for who in (mine, other)]
        await conn.execute(
            "UPDATE toolgate.approvals SET approver_groups = '{finance}' WHERE approval_id = %s", (approval_id,)
        )
        seen.append([w.approval_id for w in await console_inbox.inbox(conn, mine, approval_id)])
        return seen

    in_mine, in_other, grouped = run(database, work)
    assert approval_id in in_mine and approval_id not in in_other
    assert grouped == []  # a ticket that reached a group the approver is not in


def test_a_batch_of_changed_tickets_is_told_to_the_approvers_who_may_see_them(database: Database) -> None:
    tag = uuid.uuid4().hex[:6]
    first, second = f"appr_{tag}seen1", f"appr_{tag}seen2"
    mine, other, gone = f"acme-{tag}", f"globex-{tag}", f"gone-{tag}"
    with psycopg.connect(database.settings.database_url, autocommit=True) as conn:
        _ticket(conn, first, "PENDING", None)
        _ticket(conn, second, "APPROVED", None)  # closed tickets change too: their cards are told

    async def work(conn: psycopg.AsyncConnection[Any]) -> set[tuple[str, str]]:
        for who, tenant in ((mine, "acme"), (other, "globex"), (gone, "acme")):
            await approvers.insert(conn, who, bytes(32), ["HIGH_RISK_EXTERNAL"], [], [tenant], [])
        await conn.execute("UPDATE toolgate.approvers SET status = 'revoked' WHERE approver_id = %s", (gone,))
        return await console_inbox.seen_by(conn, [first, second, "appr_none"], [mine, other, gone, "nobody"])

    assert run(database, work) == {(first, mine), (second, mine)}


def test_a_tickets_part_in_an_edit_reads_the_same_on_the_consoles_async_connection(database: Database) -> None:
    held, edited = f"appr_{uuid.uuid4().hex[:12]}", f"appr_{uuid.uuid4().hex[:12]}"
    ids = (held, edited, f"appr_{uuid.uuid4().hex[:12]}")
    with psycopg.connect(database.settings.database_url, autocommit=True) as conn:
        _ticket(conn, held, "EDITED", None)
        _ticket(conn, edited, "PENDING", None)
        conn.execute("UPDATE toolgate.approvals SET edited_by = 'alice' WHERE approval_id = %s", (held,))
        conn.execute("UPDATE toolgate.approvals SET edit_of = %s WHERE approval_id = %s", (held, edited))
        shown = [edits.edit_state(conn, a) for a in ids]

    async def work(conn: psycopg.AsyncConnection[Any]) -> list[edits.EditState | None]:
        return [await edits.edit_state_of(conn, a) for a in ids]

    assert run(database, work) == shown
    assert shown[0] is not None and (shown[0].edited_by, shown[0].edited_into) == ("alice", edited)
    assert shown[1] is not None and (shown[1].edit_of, shown[1].edit_of_by) == (held, "alice")
    assert shown[1].held_arguments is not None and shown[2] is None


def test_the_decisions_that_did_not_count_on_a_ticket_are_read_from_the_audit_log(database: Database) -> None:
    mine, other = f"appr_{uuid.uuid4().hex[:12]}", f"appr_{uuid.uuid4().hex[:12]}"

    def entry(action: str, actor: str, approval_id: str, code: str, **more: Any) -> audit.Entry:
        detail = {"approval_id": approval_id, "decision_id": uuid.uuid4().hex, "verdict": "APPROVE", "code": code}
        return audit.Entry("approval-wait", action, actor, None, None, {**detail, **more})

    async def work(conn: psycopg.AsyncConnection[Any]) -> list[console_inbox.Uncounted]:
        async with conn.transaction():
            await audit.append(
                conn,
                [
                    entry("decision_refused", "mallory", mine, "bad_signature", proven=False),
                    entry("decision_counted", "alice", mine, "counted"),
                    entry("decision_noop", "alice", mine, "already_decided", reason="alice decided already"),
                    entry("decision_refused", "dave", other, "wrong_group", reason="not this one"),
                ],
            )
        return await console_inbox.uncounted(conn, mine)

    found = run(database, work)
    assert [(u.signer, u.repeat, u.code, u.reason, u.proven) for u in found] == [
        ("mallory", False, "bad_signature", None, False),
        ("alice", True, "already_decided", "alice decided already", True),
    ]
