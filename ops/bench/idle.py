"""`toolgate bench --idle SECONDS`: what a local `toolgate up` costs while nothing happens.

Once every stage is ready and the stack has settled (`settle_s`: the first seconds after a
start still hold the groups' joins and the first metadata, and on Tansu a stage naps only after
IDLE_AFTER_S without a record, workers/runtime/consumer.py), it reads each process's CPU
(ops/bench/cpu.py) over `seconds` of no calls and reports it as a share of one core: each
process, the broker's nodes together (`broker`), Postgres, and toolgate's own processes together
(`toolgate`: the stage workers, the demo provider and `toolgate up` itself). The issue's bound
is on `toolgate`: what toolgate burns beyond the broker's own idle.

The machine's shares over the same seconds (ops/bench/machine.py) say whether anything else
ran: `machine.busy` well above the processes' sum is another process's.
"""

from __future__ import annotations

import json
import time
from typing import Any

from toolgate.ops.bench.cpu import SUPERVISOR, CpuMeter
from toolgate.ops.bench.machine import MachineMeter
from toolgate.ops.status import await_ready
from toolgate.settings import Settings
from toolgate.workers.runtime.consumer import IDLE_AFTER_S

SETTLE_S = IDLE_AFTER_S + 10.0
INFRASTRUCTURE_NOT_BROKER = ("postgres",)


def share(spent: dict[str, float], seconds: float) -> dict[str, float]:
    """CPU seconds over `seconds` as percent of one core, each to a hundredth."""
    return {name: round(100.0 * used / seconds, 2) for name, used in spent.items()}


def grouped(percent: dict[str, float], runtime: dict[str, Any]) -> dict[str, float]:
    """The shares by kind: the broker's nodes, Postgres, and toolgate's own processes."""
    infrastructure = set(runtime.get("infrastructure", {}))
    broker = [n for n in percent if n in infrastructure and n not in INFRASTRUCTURE_NOT_BROKER]
    toolgate = [n for n in percent if n not in infrastructure]
    return {
        "broker": round(sum(percent[n] for n in broker), 2),
        "postgres": round(sum(percent[n] for n in INFRASTRUCTURE_NOT_BROKER if n in percent), 2),
        "toolgate": round(sum(percent[n] for n in toolgate), 2),
    }


def measure_idle(
    settings: Settings, seconds: float, settle_s: float = SETTLE_S, ready_timeout: float = 120.0
) -> dict[str, Any]:
    """The idle CPU of this home's `toolgate up`, over `seconds` once it is ready and settled."""
    runtime_file = settings.runtime_file
    if not runtime_file.exists():
        raise SystemExit(f"toolgate bench --idle measures a local `toolgate up`: no {runtime_file}")
    await_ready(settings, ready_timeout)
    time.sleep(settle_s)
    runtime = json.loads(runtime_file.read_text())
    machine = MachineMeter()
    meter = CpuMeter(runtime, supervisor=True)
    started = time.monotonic()
    time.sleep(seconds)
    spent = meter.spent()
    elapsed = time.monotonic() - started
    percent = share(spent, elapsed)
    cluster = runtime.get("broker_cluster", {})
    return {
        "seconds": round(elapsed, 1),
        "broker": cluster.get("broker", "tansu"),
        "nodes": len(cluster.get("nodes", {})) or 1,
        "percent_of_a_core": grouped(percent, runtime),
        "per_process": dict(sorted(percent.items(), key=lambda kv: (kv[0] != SUPERVISOR, kv[0]))),
        "machine": machine.read(),
    }
