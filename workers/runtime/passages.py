"""How a round left each call, as its `Emit.outcomes` says and the round's telemetry labels it
(the `outcome` of `toolgate.calls`, a span's `toolgate.outcome`).

    label                   when                                                  set by
    TaxonomyClass           the round ended the call: the class of its result     emit.py, normalization
    Passage.FORWARDED       passed on to the next stage                           emit.py, approval-wait
    Passage.DEAD_LETTERED   its input was dead-lettered, and nothing else said    emit.py
    Passage.RESUMED         held for approval, its ticket already open (again)    approval-wait
    Passage.HELD            held for approval, or nothing emitted for it          approval-wait, the default
    Decided                 an approval decision, by how approval-wait took it    approval-wait (decisions)
"""

from __future__ import annotations

from enum import StrEnum
from typing import NewType

from toolgate.schemas.models import TaxonomyClass


class Passage(StrEnum):
    """How a call left a round that did not end it."""

    FORWARDED = "forwarded"
    HELD = "held"
    RESUMED = "resumed"
    DEAD_LETTERED = "dead_lettered"


# An approval decision's label, by approval id: `counted:<ticket status>`, or `refused:<code>` /
# `noop:<code>` with the code of workers/approval/decision.py's verdict.
Decided = NewType("Decided", str)

Label = Passage | TaxonomyClass | Decided
