"""How much validation work each agent may spend: a budget per agent, refilled at a steady rate,
checked before the gates and charged with what each call cost. Pure: the time comes in.

One signed proposal can cost validation thousands of times what an ordinary call does (256 KiB
of arguments to parse, a refusal's findings to look for), and signed under one root, 64 cost
one signature. schema_budget.py bounds what one call may cost; this bounds how often one agent
may make validation pay it. What a call costs, in units each a small slice of validation's CPU
(docs/performance.md, "Figures behind the code"):

    units = 1 + characters of its arguments / 128 + the schema work of its refusal (schema_budget.WORK at most)

An ordinary call costs 2-3 units; a 240 KiB refusal about 1,900. Each agent has `burst` units,
refilled at `per_second`; a call is refused, RATE_LIMITED with the time until its agent is out of
debt, while its agent's balance is below zero. A call is charged after it is decided (what it
cost is known then), so one call may overdraw: the next waits the longer.

The balances live in the validation worker's memory: a worker restarted forgives every debt,
and with several validation workers an agent whose runs they share may spend up to its budget
at each. An agent that has refilled its whole budget is forgotten, so the table holds only the
agents that spent lately (MAX_AGENTS at most; past that the longest quiet go first).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

CHARACTERS_PER_UNIT = 128
MAX_AGENTS = 100_000
Agent = tuple[str, str]  # (tenant, agent_id), as the agent's signature proved them


@dataclass
class Balance:
    units: float
    at_ms: int


def cost(argument_chars: int, work: int) -> int:
    """What one call cost validation, in units."""
    return 1 + argument_chars // CHARACTERS_PER_UNIT + work


class AdmissionRate:
    def __init__(self, per_second: float, burst: float) -> None:
        if per_second <= 0 or burst <= 0:
            raise ValueError("an admission rate needs a positive rate and burst")
        self.per_ms = per_second / 1000.0
        self.burst = burst
        self.balances: dict[Agent, Balance] = {}

    def _now(self, agent: Agent, now_ms: int) -> float:
        held = self.balances.get(agent)
        if held is None:
            return self.burst
        return min(self.burst, held.units + max(0, now_ms - held.at_ms) * self.per_ms)

    def retry_after_ms(self, agent: Agent, now_ms: int) -> int | None:
        """None while the agent may be served; else how long until it is out of debt."""
        units = self._now(agent, now_ms)
        if units >= 0:
            return None
        return max(1, math.ceil(-units / self.per_ms))

    def charge(self, agent: Agent, units: int, now_ms: int) -> None:
        left = self._now(agent, now_ms) - units
        if left >= self.burst:
            self.balances.pop(agent, None)
            return
        self.balances[agent] = Balance(left, now_ms)
        if len(self.balances) > MAX_AGENTS:
            self._forget(now_ms)

    def _forget(self, now_ms: int) -> None:
        """The agents refilled by now, and then the longest quiet, until MAX_AGENTS remain."""
        for agent in [a for a in self.balances if self._now(a, now_ms) >= self.burst]:
            del self.balances[agent]
        if len(self.balances) > MAX_AGENTS:
            quiet = sorted(self.balances, key=lambda a: self.balances[a].at_ms)
            for agent in quiet[: len(self.balances) - MAX_AGENTS]:
                del self.balances[agent]
