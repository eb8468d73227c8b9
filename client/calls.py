"""What a client proposes and hears: the records it published, the calls it is waiting on, the
observations it read (toolgate.client)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from toolgate.schemas.models import Observation, ToolProposal
from toolgate.topics.producers import Record
from toolgate.trust.agent_keys import AgentSigner

INTERIM_CODE = 202
PROPOSAL_MAX_AGE_S = 900.0  # the deployment's default proposal window (settings)
# Proposals published together are signed in trees of at most this many: one signature for 64
# calls, and a path of 6 steps (198 bytes) in each.
TREE_MAX = 64


@dataclass(frozen=True)
class Draft:
    """A proposal made (`ToolgateClient.prepare`), signed and sent when it is published."""

    proposal: ToolProposal
    signer: AgentSigner
    start_offsets: tuple[tuple[int, int], ...] = ()  # observation offsets before publishing


@dataclass(frozen=True)
class Proposed:
    call_id: str
    run_id: str
    traceparent: str
    created_at_ms: int
    start_offsets: tuple[tuple[int, int], ...] = ()  # observation offsets before publishing
    tenant_id: str = ""  # where the answer comes: the agent's own tenant
    proposal_digest: str = ""  # what toolgate's answer must name
    record: Record | None = None  # the bytes published, for `wait` to re-publish
    deadline_ms: int | None = None
    resend_within_ms: int = int(1000 * (PROPOSAL_MAX_AGE_S - 60))  # resend_window_s of the deployment's window

    def resend_until_ms(self) -> int:
        """When re-publishing stops: the deadline, or the end of the signature's window."""
        window_end = self.created_at_ms + self.resend_within_ms
        return min(window_end, self.deadline_ms) if self.deadline_ms is not None else window_end


def resend_window_s(proposal_max_age_s: float) -> float:
    """How long after signing a call may be re-published: the deployment's proposal window, less a
    margin for clocks and transit (60 s, or a quarter of a short window)."""
    return proposal_max_age_s - min(60.0, proposal_max_age_s / 4)


@dataclass(frozen=True)
class Observed:
    run_id: str
    call_id: str
    observation: Observation
    partition: int
    offset: int
    received_at: float
    proposal_digest: str = ""

    @property
    def is_final(self) -> bool:
        return self.observation.status.code != INTERIM_CODE

    def as_json(self) -> dict[str, Any]:
        return self.observation.model_dump(mode="json")


def random_hex(n: int) -> str:
    """`n` random bytes in hex, for an id: os.urandom's, as uuid4's, without building a UUID, in
    a fraction of uuid4's time; a proposal takes three ids
    (docs/performance.md, "Figures behind the code")."""
    return os.urandom(n).hex()
