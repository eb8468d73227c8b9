"""The processes python tools run in (runner.py): started, given their call, and killed, whole
process group, at the call's deadline; confinement.py judges how each ended.

One process runs one call and exits. Each python tool keeps SPARES processes set up (limits,
import, sandbox) and waiting (~15 MB each), started with the worker and again after each call
has ended, off the calls' path: a call pays a round trip, not a start. Measured on the project's 2-core machine, shared
with a CI run (tests/integration/test_python_runner.py prints both): a process started at call
time cost 40 ms quiet (the interpreter's start; the runner imports asyncio only for an async
tool, which alone cost 50 ms more) and 120-200 ms busy; a spare 0.6 ms quiet, under 8 ms busy.
The used process is killed and its scratch removed (~3 ms) off the call's path too.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from toolgate.contracts.contract import Contract
from toolgate.schemas.models import TaxonomyClass
from toolgate.secrets import SecretMissing, SecretProvider
from toolgate.workers.execution import confinement
from toolgate.workers.execution.effects import Effect, Job, failed

__all__ = ["Children"]

RUNNER = (sys.executable, "-P", "-m", "toolgate.workers.execution.runner")
LINE_LIMIT = 16 * 1024 * 1024  # a tool's answer, at most
SPARES = 4  # per tool: a burst of calls (a demo tool's rate limit is 5 in 10 s) finds them ready


@dataclass
class Child:
    process: asyncio.subprocess.Process
    scratch: str
    setup: dict[str, Any]

    async def ready(self) -> dict[str, Any] | None:
        """The child's answer to its setup: ready, or why not (None: it died first)."""
        assert self.process.stdout is not None
        return _parse(await self.process.stdout.readline())


# What a sandboxed tool's process is given of the worker's environment: enough to find Python
# and the tool's module, nothing else.
SANDBOX_ENV = ("PATH", "PYTHONPATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ")


def environment(sandboxed: bool) -> dict[str, str]:
    """The environment a tool's process starts with: never the worker's TOOLGATE_* settings
    (secrets by TOOLGATE_SECRET_*, database addresses) nor libpq's PG* (a password may be
    one); a sandboxed tool's, only SANDBOX_ENV."""
    if sandboxed:
        return {k: v for k, v in os.environ.items() if k in SANDBOX_ENV}
    return {k: v for k, v in os.environ.items() if not k.startswith(("TOOLGATE_", "PG"))}


def _key(contract: Contract) -> str:
    """Contracts whose children are set up alike share their spare."""
    return json.dumps(confinement.setup(contract, ""), sort_keys=True)


def _parse(line: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(line) if line else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class Children:
    """The worker's python tool processes: SPARES spares per tool setup, started with the worker."""

    def __init__(self, secrets: SecretProvider | None = None) -> None:
        self.secrets = secrets
        self.spares: dict[str, list[asyncio.Future[Child]]] = {}
        self.ending: set[asyncio.Future[None]] = set()
        self.closed = False

    def warm(self, contracts: Iterable[Contract]) -> None:
        """Spares for every python tool, started now (the worker starts): no call pays a start,
        not even a tool's first, whose deadline may be the interactive class's 500 ms."""
        for contract in contracts:
            if contract.executor["kind"] == "python":
                self.refill(contract)

    def refill(self, contract: Contract) -> None:
        waiting = self.spares.setdefault(_key(contract), [])
        while len(waiting) < SPARES and not self.closed:
            waiting.append(asyncio.ensure_future(self.start(contract)))

    async def run(self, job: Job, now_ms: int) -> Effect:
        try:
            secrets = self.resolve(job.contract)
        except SecretMissing as exc:  # asked before any process runs: nothing happened
            return failed(TaxonomyClass.DEPENDENCY_UNAVAILABLE, "secret_unresolved", str(exc), final=True)
        waiting = self.spares.get(_key(job.contract), [])
        task = next((t for t in waiting if t.done()), waiting[0] if waiting else None)
        if task is not None:
            waiting.remove(task)
        try:
            child = await (task if task is not None else self.start(job.contract))
        except OSError as exc:  # no process to run it in: it never started
            return failed(TaxonomyClass.DEPENDENCY_UNAVAILABLE, "tool_unstarted", f"{exc}", final=False)
        try:
            ending = await self.call(child, job, (job.deadline_ms - now_ms) / 1000.0, secrets)
        finally:
            ended = asyncio.ensure_future(self.replace(child, job.contract))  # off the call's path
            self.ending.add(ended)
            ended.add_done_callback(self.ending.discard)
        return confinement.judge(job.contract, ending)

    async def start(self, contract: Contract) -> Child:
        scratch = tempfile.mkdtemp(prefix="toolgate-tool-")
        process = await asyncio.create_subprocess_exec(
            *RUNNER,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            start_new_session=True,  # its own process group, killed whole
            limit=LINE_LIMIT,
            cwd=scratch,
            env=environment(confinement.sandboxed(contract)),
        )
        setup = confinement.setup(contract, scratch)
        assert process.stdin is not None
        process.stdin.write(json.dumps(setup).encode() + b"\n")
        return Child(process, scratch, setup)

    def resolve(self, contract: Contract) -> dict[str, str]:
        """The secrets a sandboxed tool's binding names, by the names it sees them by
        (security.secrets_boundary execution_sandbox; admission refuses them anywhere else)."""
        named: dict[str, str] = contract.executor.get("secrets") or {}
        if named and self.secrets is None:
            raise SecretMissing("this worker resolves no secrets")
        return {name: self.secrets.resolve(ref) for name, ref in named.items()} if self.secrets else {}

    async def call(
        self, child: Child, job: Job, left_s: float, secrets: dict[str, str] | None = None
    ) -> confinement.Ending:
        process = child.process
        assert process.stdin is not None and process.stdout is not None
        sent = False  # whether the call reached the child: before, nothing it did is the call's
        try:
            async with asyncio.timeout(max(0.0, left_s)):
                ready = await child.ready()
                if ready is None or "ready" not in ready:
                    await process.wait()
                    return confinement.Ending(ready, process.returncode, sent=False)
                context = {**job.context, "secrets": secrets} if secrets else job.context
                request = {"arguments": dict(job.record.call.arguments), "context": context}
                process.stdin.write(json.dumps(request, default=str).encode() + b"\n")
                sent = True
                await process.stdin.drain()
                reply = _parse(await process.stdout.readline())
        except TimeoutError:
            _kill(process)
            await process.wait()
            return confinement.Ending(None, process.returncode, killed_at_deadline=True, sent=sent)
        except (BrokenPipeError, ConnectionResetError):
            await process.wait()
            return confinement.Ending(None, process.returncode, sent=sent)
        return confinement.Ending(reply, None if reply else await process.wait())

    async def replace(self, child: Child, contract: Contract) -> None:
        """A used child ended, and its spare started only then: a burst's calls are not slowed
        by their spares' starts."""
        await self.end(child)
        self.refill(contract)

    async def end(self, child: Child) -> None:
        """The child's process group killed (whatever it started goes with it), its scratch gone."""
        _kill(child.process)
        await child.process.wait()
        shutil.rmtree(child.scratch, ignore_errors=True)

    async def close(self) -> None:
        """Every used child and every spare ended (the worker stops); none is started again."""
        self.closed = True
        await asyncio.gather(*self.ending, return_exceptions=True)
        spares, self.spares = [t for waiting in self.spares.values() for t in waiting], {}
        for task in spares:
            with contextlib.suppress(Exception):
                await self.end(await task)


def _kill(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
