"""A decision's refusal: a typed code that callers, audits and tests act on, and a sentence for
whoever reads it. One type for every pure decision that refuses with a code and a reason: an
approver's edit that widens (contracts/edits.py), a decision approval-wait does not count
(workers/approval/decision.py), a proposal that proves no one (workers/validation/identity.py),
and, with the taxonomy class it fails with, a call execution refuses (workers/execution/answers.py:
Blocked).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Refusal:
    code: str
    reason: str
