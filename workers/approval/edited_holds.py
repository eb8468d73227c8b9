"""Approval-wait holding an edited call (issue 52, part 3): the reads and writes around
edited.py's choices, in the transaction that opens the round's tickets (held.py).

An edited call (validation recorded the edit: decision.py `edit_of`) gets a ticket of its own,
named by its payload hash too (`ticket_of`), linked to the ticket it was edited from. Before it
opens, policy's verdict on it is compared with the held call's: an edited call that needs more
approvals than the held one is refused (`edit_needs_more_approvals`, CONFIRMATION_MISSING, its
value released; nothing runs). Once open, the editor's approval is counted on it, once; when that
is enough, the ticket is APPROVED at once and the call released, else its packet goes to the
other approvers as any held call's does.
"""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection

from toolgate.schemas.hashing import usage_events
from toolgate.schemas.models import FieldError, StageRecord, TaxonomyClass
from toolgate.states import TicketStatus
from toolgate.store import approvals, values
from toolgate.store import edits as store_edits
from toolgate.store.outbox import OutboxRow
from toolgate.workers.approval import resume
from toolgate.workers.approval.decision import STAGE, edit_of
from toolgate.workers.approval.edited import editor_vote, wider
from toolgate.workers.approval.packet import Opening
from toolgate.workers.runtime import outbox
from toolgate.workers.runtime.handler import Inbound
from toolgate.workers.runtime.results import reject_record

Opened = dict[str, tuple[Inbound[StageRecord], Opening]]  # by approval_id


def _original(record: StageRecord) -> str | None:
    edit = edit_of(record)
    return None if edit is None else str(edit["approval_id"])


async def refuse_wider(conn: AsyncConnection[Any], held: Opened, now: int) -> list[OutboxRow]:
    """Take out of `held` the edited calls that need more approvals than their held call, and
    answer them (their value released in this transaction)."""
    originals = {a: _original(c.model) for a, (c, _) in held.items()}
    wanted = sorted({o for o in originals.values() if o is not None})
    if not wanted:
        return []
    required = await store_edits.required(conn, wanted)
    rows: list[OutboxRow] = []
    for approval_id, original in originals.items():
        record = held[approval_id][0].model
        widens = None if original is None else wider(record, required.get(original))
        if widens is None:
            continue
        del held[approval_id]
        error = FieldError(field="approval", code=widens.code, message=widens.reason)
        answer = reject_record(
            record, TaxonomyClass.CONFIRMATION_MISSING, [error], STAGE, record.traceparent, now, next_action="stop"
        )
        rows.append(outbox.item("results", record.call.home_partition, answer))
        await values.release(conn, usage_events(record.call), ended=True)
    return rows


async def count_editors(conn: AsyncConnection[Any], held: Opened, created: set[str], now: int) -> set[str]:
    """The editor's approval on each new ticket of an edited call; the tickets it approves alone
    (closed APPROVED here)."""
    edited = [a for a in created if _original(held[a][0].model) is not None]
    if not edited:
        return set()
    await store_edits.link(conn, [(a, str(_original(held[a][0].model))) for a in edited])
    await approvals.record_decisions(conn, [editor_vote(held[a][0].model, a, now) for a in edited])
    enough = {a for a in edited if held[a][0].model.required_approvals <= 1}
    if enough:
        await approvals.close(conn, sorted(enough), [str(TicketStatus.APPROVED)] * len(enough))
    return enough


def releases(held: Opened, approved: set[str], now: int) -> list[OutboxRow]:
    """The edited calls their editor's approval was enough for, released to execution."""
    rows = []
    for approval_id in sorted(approved):
        request = held[approval_id][1].request
        editor = (edit_of(request) or {}).get("edited_by", "")
        rows.append(outbox.item("executable", request.call.home_partition, resume.released(request, (editor,), now)))
    return rows
