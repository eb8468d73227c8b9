"""A stage process whose parent died ends itself after the grace period, even if something
keeps it from stopping (workers/runtime/orphan.py)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

CHILD = """
import sys, time
from toolgate.workers.runtime import orphan
orphan.watch(poll_s=0.05, grace_s=2.0)
print(__import__("os").getpid(), flush=True)
while True:  # a stop that never finishes
    time.sleep(1)
"""
PARENT = """
import subprocess, sys
child = subprocess.Popen(
    [sys.executable, "-c", sys.argv[1]], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
)
print(child.stdout.readline().strip(), flush=True)
"""  # and exits at once, leaving its child behind (holding none of the test's pipes)


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_an_orphaned_worker_ends_itself_after_the_grace_period() -> None:
    parent = subprocess.run([sys.executable, "-c", PARENT, CHILD], capture_output=True, text=True, timeout=60)
    pid = int(parent.stdout.strip())
    assert _running(pid), "the child should outlive its parent for the grace period"
    deadline = time.monotonic() + 15
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running(pid), "an orphaned worker kept running past its grace period"


def test_a_worker_with_its_parent_keeps_running() -> None:
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True)
    try:
        child.stdout.readline()  # type: ignore[union-attr]
        time.sleep(1.0)
        assert child.poll() is None
    finally:
        child.kill()
        child.communicate()
