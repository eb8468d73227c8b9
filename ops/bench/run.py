"""`toolgate bench`: drive N proposals through the running pipeline and measure it.

Each call uses the tool contract's first example as arguments and a fresh logical operation
(so every call is a new effect, never an idempotency replay). Proposals are published at full
speed or at an offered rate, signed as a registered agent, as agents do; a consumer thread
reads the tenant's observation topic from where it ended before the run and checks each
observation's signature, as clients do. The calls due at once (at full speed, TREE_MAX of them)
are published together, signed under one root as an agent's client signs the calls it has at
once (`ToolgateClient.publish`); `sign_each` publishes and signs every call alone. With
`sequential`, calls go one at a time, published with `watch` and awaited with `wait`, as an
agent that waits for each answer.
Latency is publish-to-final-observation, measured on this client's clock; the hop table
(`hops.py`, `stats.py`) says where it went, and the tail (`tail.py`) when the slowest
hundredth of calls were published, and with `--cpu` what the disk and the machine did then.

A run starts once every stage of the local `toolgate up` is ready, its consumer's partitions
assigned (`status.await_ready`; a deployment without a runtime file here is taken as running).
Started before (as soon as `toolgate status` exits 0, which it does while a stage is still
joining its group), the first second's calls waited for the stages to start, and at 1,000 calls/s
that backlog alone could decide p99 (docs/performance.md, "Started too soon").

The client's CPU counts in the figures (it shares the machine), so before the run it settles its
heap as a worker does (workers/runtime/heap.py): at full speed the collector's defaults spend CPU
on every call rescanning objects as old as the run (docs/performance.md, "Figures behind the code").
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from toolgate.client import Draft, ToolgateClient
from toolgate.client.calls import TREE_MAX, random_hex
from toolgate.contracts.registry import load_registry
from toolgate.kafka_security import agent_role
from toolgate.ops.bench.collector import Collector
from toolgate.ops.bench.hops import TopicTimes
from toolgate.ops.bench.meters import Meters
from toolgate.ops.bench.stats import hop_table, latency_summary
from toolgate.ops.bench.tail import slowest
from toolgate.ops.status import await_ready
from toolgate.settings import Settings
from toolgate.trust.agent_keys import AgentSigner
from toolgate.workers.runtime import heap

CALLS_PER_RUN = 500


@dataclass(frozen=True)
class _Workload:
    """What every call of a run sends: one tool, its first example, as one agent."""

    client: ToolgateClient
    signer: AgentSigner
    tool: str
    example: str
    scopes: list[str]
    # A run's write budget (contracts/cedar/budgets.json) is a few thousand calls; the benchmark
    # measures throughput, not the budget gate, so it spreads its calls over many runs.
    run_prefix: str
    tree: int = TREE_MAX  # at most this many calls published (and signed) together

    def prepare(self, i: int, call_id: str, *, watch: bool = False) -> Draft:
        """Call `i` of the run, under the call_id the benchmark times it by."""
        return self.client.prepare(
            self.tool,
            self.example,
            signer=self.signer,
            user_id="bench",
            scopes=self.scopes,
            run_id=f"{self.run_prefix}{i // CALLS_PER_RUN}",
            call_id=call_id,
            watch=watch,
        )


def run_bench(
    settings: Settings,
    *,
    tool: str,
    calls: int,
    rate: float,
    agent: str,
    timeout: float,
    ready_timeout: float,
    progress: bool = True,
    cpu: bool = False,
    sequential: bool = False,
    sign_each: bool = False,
) -> dict[str, Any]:
    """Publish `calls` proposals (at `rate`, or one at a time with `sequential`: publish, wait
    for its final observation as an agent does with `ToolgateClient.wait`, then the next) and
    report latency, throughput and the hop table (`ops/bench/stats.py`). The calls due at once
    are published and signed together, up to TREE_MAX; with `sign_each`, every call alone."""
    waited = await_ready(settings, ready_timeout)
    contract = load_registry(settings.contracts_dir).resolve(tool, "latest")
    example = json.dumps(contract.document["affordance"]["examples"][0]["arguments"])
    scopes = list(contract.required_scopes)
    client = ToolgateClient.from_settings(settings, client_id="toolgate-bench", role=agent_role(agent))
    run_prefix = f"bench_{uuid.uuid4().hex[:10]}_"
    work = _Workload(client, client.signer(agent), tool, example, scopes, run_prefix, 1 if sign_each else TREE_MAX)
    # Connected before the clock starts, as an agent connects as it starts: a call's latency is
    # the pipeline's, not the client's first connection (`ToolgateClient.connect`).
    client.connect(work.signer.tenant_id if sequential else None)
    times = TopicTimes(settings, client, work.signer.tenant_id)
    times.start()
    meters = Meters(settings) if cpu else None
    heap.settle()
    if meters is not None:
        meters.begin()
    clock = _Clock()
    with _progress_bar(progress) as bar:
        if sequential:
            run = _run_sequential(work, calls, timeout, bar)
        else:
            run = _run_offered(work, calls, rate, timeout, bar)
    # Read as the run ends: reading the hop table below consumes every topic again, which costs
    # the broker and this process as much as the run itself and is none of the calls' cost.
    measured = meters.read(calls) if meters is not None else {}
    received = run.received
    # Each answered call: when it was published (monotonic s) and its latency (ms).
    answered = [(clock.monotonic(at), (received[c][0] - at) * 1000) for c, at in run.sent.items() if c in received]
    report = _report(tool, calls, rate, run, [ms for _, ms in answered])
    report["mode"] = "sequential" if sequential else "offered"
    report["waited_for_stages_s"] = round(waited, 2)
    report["hops"] = hop_table(_paths(run, clock, times.read(set(run.sent))))
    report.update(measured)
    timeline = meters.timeline if meters is not None else None
    report["tail"] = slowest(answered, clock.monotonic(run.started), timeline)
    return report


class _Clock:
    """This process's perf_counter readings as wall-clock milliseconds, the clock Kafka record
    timestamps are on (one offset, taken once: perf_counter is steady, the wall clock is not),
    and as monotonic seconds, the clock the meters' timelines are on."""

    def __init__(self) -> None:
        self.offset_ms = time.time() * 1000 - time.perf_counter() * 1000
        self.monotonic_offset_s = time.monotonic() - time.perf_counter()

    def wall_ms(self, perf: float) -> float:
        return perf * 1000 + self.offset_ms

    def monotonic(self, perf: float) -> float:
        return perf + self.monotonic_offset_s


@dataclass
class _Run:
    """What a run measured: when each call was published and when its final observation came
    (perf_counter seconds), whether it was an error, the observations whose signature failed,
    and how many publications (signatures) the calls went out in."""

    sent: dict[str, float]
    received: dict[str, tuple[float, bool]]
    started: float
    published: float
    forged: int = 0
    publications: int = 0


def _run_offered(work: _Workload, calls: int, rate: float, timeout: float, bar: Progress) -> _Run:
    collector = Collector(work.client, work.signer.tenant_id, work.run_prefix, calls)
    collector.start()
    started = time.perf_counter()
    published = bar.add_task("published", total=calls)
    observed = bar.add_task("observed ", total=calls)
    sent, publications = _publish(work, calls, rate, started, collector, bar, (published, observed))
    publish_done = time.perf_counter()
    bar.update(published, completed=calls)
    _await_observations(collector, timeout, bar, observed)
    return _Run(sent, dict(collector.received), started, publish_done, collector.forged, publications)


def _run_sequential(work: _Workload, calls: int, timeout: float, bar: Progress) -> _Run:
    """One call at a time, as an agent that waits for each observation before its next call."""
    task = bar.add_task("observed ", total=calls)
    run = _Run({}, {}, time.perf_counter(), 0.0, publications=calls)
    for i in range(calls):
        call_id = f"bench_{random_hex(16)}"
        run.sent[call_id] = time.perf_counter()
        [proposed] = work.client.publish([work.prepare(i, call_id, watch=True)])
        try:
            seen = work.client.wait(proposed, timeout=timeout)
        except TimeoutError:
            continue
        run.received[call_id] = (time.perf_counter(), seen.observation.status.is_error)
        bar.update(task, completed=i + 1)
    run.published = max(run.sent.values(), default=run.started)
    return run


def _paths(run: _Run, clock: _Clock, topic_times: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """Each call's points (stats.POINTS), in wall-clock ms."""
    paths: dict[str, dict[str, float]] = {}
    for call_id, at in run.sent.items():
        path = {"published": clock.wall_ms(at), **topic_times.get(call_id, {})}
        if call_id in run.received:
            path["received"] = clock.wall_ms(run.received[call_id][0])
        paths[call_id] = path
    return paths


def _progress_bar(enabled: bool) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        disable=not enabled,
    )


def _publish(
    work: _Workload,
    calls: int,
    rate: float,
    started: float,
    collector: Collector,
    bar: Progress,
    tasks: tuple[TaskID, TaskID],
) -> tuple[dict[str, float], int]:
    """Publish every call (at the offered rate, if any) and flush; when each was sent, and in how
    many publications. The calls due at once are published together, as an agent publishes the
    calls it has (signed together, `ToolgateClient.publish`); with `work.tree` 1 each alone."""
    published, observed = tasks
    sent: dict[str, float] = {}
    drafts: list[Draft] = []
    publications = 0
    for i in range(calls):
        if rate > 0:
            due = started + i / rate
            while (lag := due - time.perf_counter()) > 0:
                time.sleep(min(lag, 0.01))
        call_id = f"bench_{random_hex(16)}"
        sent[call_id] = time.perf_counter()
        drafts.append(work.prepare(i, call_id))
        next_due = started + (i + 1) / rate if rate > 0 else 0.0
        if len(drafts) >= work.tree or i + 1 == calls or next_due > time.perf_counter():
            work.client.publish(drafts, flush=False)
            drafts, publications = [], publications + 1
        if i % 200 == 0:
            bar.update(published, completed=i)
            bar.update(observed, completed=len(collector.received))
    work.client.flush()
    return sent, publications


def _await_observations(collector: Collector, timeout: float, bar: Progress, observed: TaskID) -> None:
    """Wait for the collector to see every final observation, or for the timeout."""
    deadline = time.monotonic() + timeout
    while not collector.done.is_set() and time.monotonic() < deadline:
        bar.update(observed, completed=len(collector.received))
        time.sleep(0.1)
    collector.stop.set()
    collector.join(5)
    bar.update(observed, completed=len(collector.received))


def _report(tool: str, calls: int, rate: float, run: _Run, latencies: list[float]) -> dict[str, Any]:
    """Throughput and publish-to-final-observation latency percentiles (`latencies`, ms) of a run."""
    received = run.received
    last = max((v[0] for v in received.values()), default=run.published)
    elapsed = max(1e-9, last - run.started)
    return {
        "tool": tool,
        "calls": calls,
        "offered_rate": rate or None,
        "observed": len(received),
        "missing": calls - len(received),
        "errors": sum(1 for _, is_error in received.values() if is_error) + (calls - len(received)),
        "unsigned_observations": run.forged,
        "calls_per_signature": round(calls / max(1, run.publications), 1),
        "calls_per_second": round(len(received) / elapsed, 1),
        "publish_seconds": round(run.published - run.started, 2),
        "elapsed_seconds": round(elapsed, 2),
        **latency_summary(latencies),
    }
