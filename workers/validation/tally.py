"""What one proposal's validation counts toward seed 000's validation and repair rates. Pure: the
proposal and its decisions come in, `GateFacts` come out; the round's telemetry records them
(workers/runtime/stage_metrics.py).

    gates and semantic rules said        schema     semantic
    Pass                                 valid      valid
    Reject SEMANTIC_INVALIDITY           valid      invalid
    Reject by an earlier gate            invalid    unchecked

A proposal is a first attempt, or a repair when it says so (`repair_attempt` > 0: the agent
numbers its repairs, in what it signs). The repair loop's events:

    first attempt, refused repairably            triggered (and exhausted, if the loop ended at once)
    a repair, refused and the loop ended         exhausted
    a repair that passes                         repaired

A loop ends (BUDGET_EXHAUSTED, repair_loop_exhausted) by repair.py's rules. A proposal refused at
the door (who asked, call_id reuse, admission rate) reaches no gate: the round's telemetry counts
it unchecked.
"""

from __future__ import annotations

from toolgate.schemas.models import TaxonomyClass, ToolProposal
from toolgate.workers.runtime.call_facts import GateFacts
from toolgate.workers.validation.decision import Decision, Pass
from toolgate.workers.validation.repair import REPAIRABLE


def attempt_of(proposal: ToolProposal) -> str:
    return "repair" if proposal.repair_attempt > 0 else "first"


def tally(proposal: ToolProposal, gated: Decision, final: Decision) -> GateFacts:
    """`gated`: the decision of the gates and semantic rules; `final`: after the repair loop."""
    attempt = attempt_of(proposal)
    if isinstance(gated, Pass):
        return GateFacts(attempt, "valid", "valid", ("repaired",) if attempt == "repair" else ())
    semantic = gated.taxonomy_class is TaxonomyClass.SEMANTIC_INVALIDITY
    loop: tuple[str, ...] = ()
    if gated.taxonomy_class in REPAIRABLE:
        exhausted = not isinstance(final, Pass) and final.taxonomy_class is TaxonomyClass.BUDGET_EXHAUSTED
        loop = (("triggered",) if attempt == "first" else ()) + (("exhausted",) if exhausted else ())
    return GateFacts(attempt, "valid" if semantic else "invalid", "invalid" if semantic else "unchecked", loop)
