"""Admitting a round's proposals: the reads and writes around admission.py's decisions.

For all of a round's proposals at once: the registered agents they name (callers.py), who asked
(admission.screen), the call_ids they use, bound to their digests, and the validation work their
agents may still spend (admission_rate.py). What each proposal gets:

    no proven signature (admission.Drop)               dead-lettered with its bytes, audited
                                                       (collapsed into counts: refusals.py)
    refused at the door (admission.Refuse)             its refusal, on its own tenant's topic,
      ... a copy of a call already bound to its digest   but dropped and audited (collapsed)
    proven, its call_id bound to another proposal      refused SIGNATURE_MISMATCH (call_id_reused)
    proven, its agent in debt                          refused RATE_LIMITED, with the time to wait,
      ... a copy of a call bound before this round       but dropped and audited (collapsed)
    proven, new or the same call again                 admitted: on to the gates

One answer per call: a call bound to its digest was answered, or will be, by its first delivery,
so a copy that would be refused at the door is that call's business already (review N3).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection

from toolgate.schemas.models import FieldError, TaxonomyClass, ToolProposal
from toolgate.store import audit
from toolgate.trust.merkle import CheckedRoots
from toolgate.trust.proposal_signing import ROOT_PURPOSE
from toolgate.workers.runtime.emit import Emit
from toolgate.workers.runtime.freshness import Bound
from toolgate.workers.runtime.handler import Inbound
from toolgate.workers.runtime.refusals import Refusal
from toolgate.workers.runtime.results import reject
from toolgate.workers.validation import admission, admission_rate, callers, edit_admission, limits
from toolgate.workers.validation.decision import Decision, Reject
from toolgate.workers.validation.edits import ProvenEdit
from toolgate.workers.validation.identity import Proven

STAGE = admission.STAGE
SOURCE = "proposals"


@dataclass(frozen=True)
class Admitted:
    """A call whose signature proved who asked, as the registry vouches for it (its agent's
    tenant, the scopes it asked for within those granted). The record as it arrived stays as
    it was: a round that is retried checks the same signed bytes again."""

    call: Inbound[ToolProposal]
    proposal: ToolProposal
    digest: str
    repeat: bool = False  # its call_id was bound to this digest before this round
    edit: ProvenEdit | None = None  # an approver's edit of a held call, re-entered (edits.py)


@dataclass(frozen=True)
class Round:
    """What every step of admitting a round shares: its connection, its time, where its answers
    go and the audit entries it adds."""

    conn: AsyncConnection[Any]
    now: int
    out: Emit
    entries: list[audit.Entry]


class Admitting:
    def __init__(self, window: Bound, rate: admission_rate.AdmissionRate) -> None:
        self.window = window
        self.rate = rate
        # Roots of proposals signed together whose signature held: checked once, not per proposal.
        self.roots = CheckedRoots(ROOT_PURPOSE)

    async def admit(self, at: Round, calls: list[Inbound[ToolProposal]]) -> list[Admitted]:
        """The calls whose signature proves who asked, bound to their call_id; every other call
        is refused, dropped or dead-lettered here (the table above). A re-entered edit is proven
        by its approver's decision instead (edit_admission.py); its call_id is the held call's."""
        edited = [c for c in calls if c.model.edit is not None]
        calls = [c for c in calls if c.model.edit is None]
        edits = await edit_admission.admit(at.conn, edited, at.out, SOURCE) if edited else []
        admitted = [Admitted(call, e.proposal, e.digest, edit=e) for call, e in edits]
        return admitted + await self._admit_signed(at, calls)

    async def _admit_signed(self, at: Round, calls: list[Inbound[ToolProposal]]) -> list[Admitted]:
        agents = await callers.load_agents(at.conn, (c.model.principal.agent_id for c in calls))
        proven: list[tuple[Inbound[ToolProposal], Proven]] = []
        refused: list[tuple[Inbound[ToolProposal], admission.Refuse]] = []
        for call in calls:
            agent = agents.get(call.model.principal.agent_id)
            screened = admission.screen(call.model, len(call.raw), agent, at.now, self.window, self.roots)
            if isinstance(screened, Proven):
                proven.append((call, screened))
            elif isinstance(screened, admission.Drop):  # nobody proven to answer: the operator gets the bytes
                call_id = limits.routable(call.model.call_id)
                at.out.dead_letter(call.origin, call.raw, screened.taxonomy_class, screened.reason, call_id)
                at.out.refusals.append(Refusal(screened.entry, SOURCE))  # audited collapsed
            else:
                refused.append((call, screened))
        await self._refuse_unless_bound(at, refused)
        bound, before = await callers.register_calls(at.conn, [callers.new_call(c.model, i) for c, i in proven])
        admitted = []
        for call, identity in proven:
            pair = (identity.tenant_id, call.model.call_id)
            proposal = admission.as_registered(call.model, identity)
            if bound.get(pair, identity.digest) != identity.digest:
                reused = admission.call_id_reused(proposal, identity)
                at.entries.append(reused.entry)
                answer(call, reused, at.now, at.out)
                continue
            admitted.append(Admitted(call, proposal, identity.digest, pair in before))
        return admitted

    async def _refuse_unless_bound(
        self, at: Round, refused: list[tuple[Inbound[ToolProposal], admission.Refuse]]
    ) -> None:
        """Answer each refusal, unless it refuses a copy of a call already bound to the same
        digest: that call was answered by its first delivery, so the copy is audited and dropped."""
        if not refused:
            return
        bound = await callers.bound_digests(at.conn, [(r.proposal.tenant_id, r.proposal.call_id) for _, r in refused])
        for call, r in refused:
            if bound.get((r.proposal.tenant_id, r.proposal.call_id)) == r.digest:
                at.out.refusals.append(Refusal(admission.copy_dropped(r), SOURCE))  # a replay: collapsed
                continue
            at.entries.append(r.entry)
            answer(call, r, at.now, at.out)

    def decide_within_rate(
        self, at: Round, admitted: list[Admitted], decide: Callable[[ToolProposal], Decision]
    ) -> tuple[list[Admitted], list[Decision]]:
        """The gates for each admitted call, in order, within its agent's admission rate: a call
        whose agent is in debt is refused before any gate (RATE_LIMITED; a copy of a call bound
        before is dropped instead), and each decided call is charged what it cost."""
        decided: list[tuple[Admitted, Decision]] = []
        for a in admitted:
            agent = (a.proposal.tenant_id, a.proposal.principal.agent_id)
            wait = self.rate.retry_after_ms(agent, at.now)
            if wait is not None:
                limited = admission.rate_limited(a.proposal, a.digest, wait)
                if a.repeat:
                    at.out.refusals.append(Refusal(admission.copy_dropped(limited), SOURCE))
                    continue
                at.entries.append(limited.entry)
                answer(a.call, limited, at.now, at.out)
                continue
            decision = decide(a.proposal)
            work = decision.work if isinstance(decision, Reject) else 0
            self.rate.charge(agent, admission_rate.cost(len(a.proposal.arguments), work), at.now)
            decided.append((a, decision))
        return [a for a, _ in decided], [d for _, d in decided]


def answer(call: Inbound[ToolProposal], refused: admission.Refuse, now: int, out: Emit) -> None:
    """A proven caller's refusal at the door, on its own tenant's results."""
    taxonomy, errors = refused.taxonomy_class, refused.errors
    refuse(call, refused.proposal, refused.digest, taxonomy, errors, now, out, retry_after_ms=refused.retry_after_ms)


def refuse(
    call: Inbound[ToolProposal],
    proposal: ToolProposal,
    digest: str,
    taxonomy_class: TaxonomyClass,
    errors: Sequence[FieldError],
    now: int,
    out: Emit,
    **fields: Any,
) -> None:
    """A proven caller's refusal, on the results partition its call came in on: `proposal` as it
    may be answered, `digest` what its signature proved, `fields` the rest of `reject`'s."""
    home = call.origin.partition
    res = reject(
        proposal,
        taxonomy_class,
        errors,
        stage=STAGE,
        traceparent=call.traceparent,
        home_partition=home,
        now_ms=now,
        proposal_digest=digest,
        **fields,
    )
    out.item("results", home, res)
