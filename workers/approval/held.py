"""Approval-wait on tool.authorized: a call that needs approval is held.

Calls that need no approval go straight on to tool.executable, as do dry runs: a dry run needs
no approval to be previewed, and execution only describes what would happen (the preview says
how many approvals the real call needs). The others get a ticket in Postgres and a
confirmation packet on tool.approvals.requested (through the outbox, with the ticket), and the
agent hears that its call awaits approval. A call whose ticket already exists came again: what
is said again is the ticket's (resume.py). An approver's edited call gets a ticket of its own,
its editor counted once (edited_holds.py).
"""

from __future__ import annotations

from collections.abc import Callable

from toolgate.contracts.contract import Contract
from toolgate.contracts.registry import Registry
from toolgate.schemas.codec import DecodeError, codec
from toolgate.schemas.models import StageHead, StageRecord, TaxonomyClass
from toolgate.settings import Settings
from toolgate.store import audit
from toolgate.store import outbox as outbox_rows
from toolgate.store.outbox import OutboxRow
from toolgate.workers.approval import edited_holds, resume, tickets
from toolgate.workers.approval.decision import STAGE
from toolgate.workers.approval.packet import Opening, opening
from toolgate.workers.runtime import fact_loader, facts, target_state
from toolgate.workers.runtime.clock import now_ms
from toolgate.workers.runtime.emit import Emit
from toolgate.workers.runtime.handler import Handler, Inbound, fail_closed
from toolgate.workers.runtime.passages import Passage

Opened = dict[str, tuple[Inbound[StageRecord], Opening]]  # by approval_id


Read = StageRecord | StageHead  # a call's head (the schema's projection), or a whole record


class AuthorizedHandler(Handler[Read]):
    stage = STAGE
    source = "authorized"
    model = StageRecord

    def __init__(self, registry: Registry, settings: Settings, opened: Callable[[], None] = lambda: None) -> None:
        """`opened()` is called once a round opened tickets (the expiry sweep's alarm)."""
        super().__init__(registry, settings)
        self.opened = opened

    async def handle(self, calls: list[Inbound[Read]], out: Emit) -> None:
        now = now_ms()
        waiting = self._forward(calls, out)
        if not waiting:
            return
        async with self.pool.connection() as conn:
            wanted = facts.needed(ref for call, contract in waiting for ref in target_state.refs(call.model, contract))
            found = await fact_loader.fetch(conn, wanted)
        held: Opened = {}
        for call, contract in waiting:
            opened = opening(call.model, call.traceparent, contract, found, now)
            held[opened.approval_id] = (call, opened)
        asked = list(held.values())
        async with self.pool.connection() as conn, conn.transaction():
            refused = await edited_holds.refuse_wider(conn, held, now)
            created = await tickets.insert(conn, [opened for _, opened in held.values()])
            approved = await edited_holds.count_editors(conn, held, created, now)
            rows, entries = announce(held, created - approved, now)
            rows += refused + edited_holds.releases(held, approved, now)
            # A ticket that already existed: the call came again (re-published, or re-driven).
            known = await resume.load(conn, [a for a in held if a not in created])
            again_rows, again_entries = say_again(held, known, now)
            await outbox_rows.enqueue(conn, rows + again_rows, self.topics)
            await audit.append(conn, entries + again_entries)
        if created:
            self.opened()
        for call_id in {c.model.call.call_id for c, _ in asked} - {c.model.call.call_id for c, _ in held.values()}:
            out.outcomes[call_id] = TaxonomyClass.CONFIRMATION_MISSING  # an edited call refused (edited_holds.py)
        for approval_id, (call, _) in held.items():
            out.outcomes[call.model.call.call_id] = Passage.HELD if approval_id in created else Passage.RESUMED

    def decode(self, value: bytes) -> Read:
        """A call's head, or the whole record an older release wrote."""
        head = codec().project(value, StageHead)
        return head if head is not None else codec().decode(value, StageRecord)

    def on_failure(self, call: Inbound[Read], error: str, out: Emit) -> None:
        whole = _whole(call)
        if whole is not None:
            fail_closed(whole.model, self.stage, call.traceparent, out)

    def _forward(self, calls: list[Inbound[Read]], out: Emit) -> list[tuple[Inbound[StageRecord], Contract]]:
        """Forward what needs no approval; the rest, read whole, with their contracts, wait."""
        waiting: list[tuple[Inbound[StageRecord], Contract]] = []
        for call in calls:
            record = call.model
            if record.required_approvals == 0 or record.call.dry_run:
                # Nothing to decide: forward the item's bytes as they came (no re-encoding).
                out.raw_item("executable", record.call.home_partition, call.raw)
                out.outcomes[record.call.call_id] = Passage.FORWARDED
                continue
            whole = _whole(call)
            if whole is None:  # its head was read, the rest is not a StageRecord
                reason = "undecodable StageRecord"
                out.dead_letter(call.origin, call.raw, TaxonomyClass.SYNTACTIC_PARSE_FAIL, reason, record.call.call_id)
                continue
            waiting.append((whole, self.registry.get(record.call.tool_name, record.call.tool_version)))
        return waiting


def _whole(call: Inbound[Read]) -> Inbound[StageRecord] | None:
    """The call with its whole record; None when its bytes are not one."""
    if isinstance(call.model, StageRecord):
        return Inbound(call.model, call.raw, call.origin, call.span, call.traceparent)
    try:
        record = codec().decode(call.raw, StageRecord)
    except DecodeError:
        return None
    return Inbound(record, call.raw, call.origin, call.span, call.traceparent)


def announce(held: Opened, created: set[str], now: int) -> tuple[list[OutboxRow], list[audit.Entry]]:
    """The packets of the tickets just written, and the interim answers to their agents."""
    rows: list[OutboxRow] = []
    entries: list[audit.Entry] = []
    for approval_id in created:
        call, opened = held[approval_id]
        record, packet = call.model, opened.packet
        rows += resume.announced(record, packet, call.traceparent, now)
        detail = {
            "approval_id": approval_id,
            "risk_class": packet.risk_class,
            "required_approvals": record.required_approvals,
            "expires_at_ms": packet.expires_at_ms,
        }
        entries.append(
            audit.Entry(STAGE, "approval_requested", "toolgate", record.call.call_id, record.call.tenant_id, detail)
        )
    return rows, entries


def say_again(held: Opened, known: dict[str, resume.Held], now: int) -> tuple[list[OutboxRow], list[audit.Entry]]:
    """What the tickets that already existed say again (resume.py's table)."""
    rows: list[OutboxRow] = []
    entries: list[audit.Entry] = []
    for approval_id, ticket in known.items():
        call = held[approval_id][0]
        rows += resume.again(ticket, call.traceparent, now)
        detail = {"approval_id": approval_id, "status": str(ticket.status)}
        entries.append(
            audit.Entry(
                STAGE, "approval_resumed", "toolgate", call.model.call.call_id, call.model.call.tenant_id, detail
            )
        )
    return rows, entries
