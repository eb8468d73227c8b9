"""Microbenchmark of the policy rules per call in Cedar (issue 51).

`python -m tests.cedar_microbench` prints µs per call, best of several repeats, for a mix of the
shipped tools' calls (the JSON rules Cedar replaced cost 9-14 µs a call on this machine,
docs/cedar-plan.md):
* cedar-context: building the Cedar requests and entities only (Python);
* cedar batch N distinct|repeating: workers/policy/cedar.py's `judge` over rounds of N calls (the shipped set,
  rules.cedar and arguments.cedar; the action hierarchy as entities, no schema per request);
* cedar single: one is_authorized per call, for comparison.
Not a test (pytest does not collect it): numbers for docs/cedar-plan.md.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import cedarpy

from tests.unit.factories import principal, registry, stage_record
from toolgate.contracts.cedar_policy import load_cedar
from toolgate.workers.policy.cedar import Ask, entities_of, judge, request_of

NOON = 1_795_435_200_000  # 2026-11-23 12:00 UTC
DOMAINS = {"acme": ["acme.example"]}


def calls(n: int, distinct: bool = True) -> list[Ask]:
    """A mix of the shipped tools' example calls. `distinct`: each call a request of its own to
    Cedar (an agent of its own: the worst case, nothing to share), else one agent's calls at
    one time, as a round of real traffic often is: a tool's calls then make the same request
    once cut to what its policies read, and Cedar is asked once."""
    shipped = [c for c in registry() if c.lifecycle == "active"]
    asks = []
    for i in range(n):
        c = shipped[i % len(shipped)]
        agent = principal().model_copy(update={"agent_id": f"agent_{i}" if distinct else "agent_1"})
        asks.append(Ask(stage_record(c, call_id=f"call_{i}", principal=agent), c, "prod", NOON, {}, {}))
    return asks


def best_us(work: Callable[[], object], per: int, repeats: int = 7, loops: int = 20) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(loops):
            work()
        times.append((time.perf_counter() - start) / loops / per * 1e6)
    return min(times)


def main() -> None:
    cedar_policy = load_cedar(registry())
    asks = calls(500)
    for size, distinct in ((1, True), (10, True), (100, True), (500, True), (100, False)):
        batch = asks[:size] if distinct else calls(size, distinct=False)
        loops = max(1, 2000 // size)
        context = best_us(
            lambda b=batch: (
                [request_of(cedar_policy, a) for a in b],
                entities_of(b, DOMAINS, cedar_policy.principal_attributes),
            ),
            size,
            loops=loops,
        )
        judged = best_us(lambda b=batch: judge(cedar_policy, b, DOMAINS), size, loops=loops)
        kind = "distinct" if distinct else "repeating"
        print(f"cedar batch {size:4d} {kind:9s} {judged:8.2f} µs/call  (requests and entities {context:6.2f})")
    entities = cedar_policy.actions.with_added_json_str(
        json.dumps(entities_of(asks[:100], DOMAINS, cedar_policy.principal_attributes))
    )

    def single() -> None:
        for a in asks[:100]:
            cedarpy.is_authorized(request_of(cedar_policy, a), cedar_policy.policies, entities)

    print(f"cedar single         {best_us(single, 100, loops=5):8.2f} µs/call  (one is_authorized per call)")


if __name__ == "__main__":
    main()
