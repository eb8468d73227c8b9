"""How fast the machine ran during a benchmark run, second by second.

`machine.probe_ms_before` and `probe_ms_after` time a fixed piece of Python just before and just
after a run. A host that slows this virtual machine for a stretch inside the run escapes both: on
this project's machine a run at full speed read about what a quiet stretch reads before and
after, yet every process spent more CPU a call than in the runs before it, and the run made fewer
calls a second (docs/performance.md, "The fifteenth session"; "Figures behind the code").

So a `--cpu` run also times a small piece of the same work once a second, in a process of its
own (a thread of the benchmark would take the GIL from the client's threads while it ran), as
its own CPU time, so that waiting for a core does not count. The work is a ninth of the probe's
and each sample is scaled to the probe's, so the three read alike; on a machine the run keeps
busy the samples read a little more than on an idle one (caches the other processes emptied).
The report says how many samples came, their median, their slowest tenth, the slowest one, and
how many read half again the probe before the run (`slow_seconds`). Each sample comes with when
it was taken (the monotonic clock, which every process of the machine shares), to set beside the
run's slowest calls (ops/bench/tail.py).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field

from toolgate.ops.bench.machine import PROBE_ROUNDS, probe_work
from toolgate.ops.bench.stats import percentile

EVERY_S = 1.0
# A sample does a ninth of the probe's work: little CPU a second
# (docs/performance.md, "Figures behind the code").
SHARE = 9
SLOW = 1.5  # a sample this many times the probe before the run is a slow second
FIRST_SAMPLE_S = 10.0  # how long `read` waits for the first sample of a run shorter than its start


@dataclass(frozen=True)
class Speed:
    """The samples of one run, in the probe's milliseconds, and when each was taken (`timeline`:
    monotonic seconds and milliseconds, for the samples that said when)."""

    samples: list[float]
    timeline: list[tuple[float, float]] = field(default_factory=list)

    def report(self, before_ms: float) -> dict[str, float | int]:
        if not self.samples:
            return {"samples": 0}
        ordered = sorted(self.samples)
        return {
            "samples": len(ordered),
            "median": round(statistics.median(ordered), 2),
            "p90": round(percentile(ordered, 90), 2),
            "max": round(ordered[-1], 2),
            "slow_seconds": sum(1 for ms in ordered if ms >= SLOW * before_ms),
        }


def parse(lines: str) -> Speed:
    """The samples the probe process printed, a line each: when it was taken and its
    milliseconds, or its milliseconds alone (anything else is skipped)."""
    samples: list[float] = []
    timeline: list[tuple[float, float]] = []
    for line in lines.splitlines():
        try:
            numbers = [float(word) for word in line.split()]
        except ValueError:
            continue
        if len(numbers) == 1:
            samples.append(numbers[0])
        elif len(numbers) == 2:
            samples.append(numbers[1])
            timeline.append((numbers[0], numbers[1]))
    return Speed(samples, timeline)


class SpeedMeter:
    """The probe process, from `start()` to `read()`."""

    def __init__(self, every_s: float = EVERY_S) -> None:
        self.every_s = every_s
        self._process: subprocess.Popen[str] | None = None

    def start(self) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "toolgate.ops.bench.speed", "--every", str(self.every_s)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )

    def read(self) -> Speed:
        """Stop the probe process once it has taken its first sample (a run can be shorter than
        the process's start); what it sampled (nothing if it never started)."""
        if self._process is None or self._process.stdout is None:
            return Speed([])
        first = ""
        if select.select([self._process.stdout], [], [], FIRST_SAMPLE_S)[0]:
            first = self._process.stdout.readline()
        self._process.terminate()
        out, _ = self._process.communicate()
        return parse(first + out)


def sample_ms() -> float:
    """One sample: this thread's CPU time for a ninth of the probe's work, scaled to all of it."""
    started = time.thread_time()
    probe_work(PROBE_ROUNDS // SHARE)
    return (time.thread_time() - started) * 1000 * SHARE


def main() -> None:
    parser = argparse.ArgumentParser(description="Print the probe's time once every --every seconds.")
    parser.add_argument("--every", type=float, default=EVERY_S)
    every = parser.parse_args().every
    parent = os.getppid()
    next_at = time.monotonic()
    while os.getppid() == parent:  # a benchmark that died does not leave its probe running
        ms = sample_ms()
        print(f"{time.monotonic():.3f} {ms:.3f}", flush=True)
        next_at += every
        time.sleep(max(0.0, next_at - time.monotonic()))


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt, BrokenPipeError):
        main()
