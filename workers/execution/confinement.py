"""How a python tool is confined, and what its child process's ending means: pure.

A python tool runs in a child process of its own (runner.py, started by children.py) under
resource limits, its binding's `executor.limits` or these defaults, and, when its contract says
`runtime.sandbox_isolated: true`, in a sandbox: no network, no filesystem but its scratch
directory (landlock.py). How its child ended is judged here:

    answered a value                          -> Done
    raised MemoryError                        -> Failed BUDGET_EXHAUSTED memory_limit
    raised a refusal of the sandbox's          -> Failed POLICY_VIOLATION sandbox_denied
      (sandboxed, EACCES/EPERM/ENETUNREACH...)
    raised anything else                      -> Failed UNKNOWN_ERROR tool_raised
    could not be set up (import, limits)      -> Failed DEPENDENCY_UNAVAILABLE tool_unready:
                                                 it never started, nothing happened
    killed at its deadline, or died (a CPU    -> a READ_ONLY tool: Failed TIMEOUT deadline_killed,
      limit's SIGXCPU/SIGKILL, a crash)          BUDGET_EXHAUSTED cpu_limit or UNKNOWN_ERROR
                                                 crashed (it changed nothing);
                                                 a mutation: Unknown, its key stays PENDING (it
                                                 may have acted before it died), unless the call
                                                 never reached it: then as a read

Every Failed but a read's TIMEOUT is final: a tool that raised, or was cut by its limits, would
do it again.
"""

from __future__ import annotations

import errno
import signal
from dataclasses import asdict, dataclass
from typing import Any

from toolgate.contracts.contract import Contract
from toolgate.schemas.models import TaxonomyClass
from toolgate.workers.execution.effects import Done, Effect, Unknown, failed

__all__ = ["DEFAULTS", "Ending", "Limits", "judge", "limits_for", "setup"]


@dataclass(frozen=True)
class Limits:
    memory_mb: int = 512  # address space (RLIMIT_AS): the interpreter alone maps ~30 MB
    cpu_seconds: int = 10  # RLIMIT_CPU: SIGXCPU at the soft limit, SIGKILL a second later
    open_files: int = 64  # RLIMIT_NOFILE
    file_size_mb: int = 16  # RLIMIT_FSIZE: a larger write fails with EFBIG


DEFAULTS = Limits()

# What the kernel answers a sandboxed tool that reaches past its sandbox.
DENIED = frozenset({errno.EACCES, errno.EPERM, errno.ENETUNREACH, errno.EHOSTUNREACH, errno.EROFS})


@dataclass(frozen=True)
class Ending:
    """How a child ended: its answer (None if it gave none) and how its process ended."""

    reply: dict[str, Any] | None
    returncode: int | None
    killed_at_deadline: bool = False
    sent: bool = True  # False: it ended before its call reached it (a spare that died, or was slow)


def limits_for(contract: Contract) -> Limits:
    return Limits(**{**asdict(DEFAULTS), **(contract.executor.get("limits") or {})})


def sandboxed(contract: Contract) -> bool:
    return bool(contract.document["runtime"].get("sandbox_isolated"))


def setup(contract: Contract, scratch: str) -> dict[str, Any]:
    """What a child is told before its call (runner.py's first line)."""
    return {
        "callable": contract.executor["callable"],
        "limits": asdict(limits_for(contract)),
        "sandbox": sandboxed(contract),
        "scratch": scratch,
    }


def judge(contract: Contract, ending: Ending) -> Effect:
    reply = ending.reply or {}
    if "ok" in reply:
        return Done(reply["ok"])
    if "unready" in reply:
        why = reply["unready"]
        return failed(
            TaxonomyClass.DEPENDENCY_UNAVAILABLE,
            "tool_unready",
            f"the tool could not be set up: {why['type']}: {why['message']}",
            final=True,
        )
    if "raised" in reply:
        return _raised(contract, reply["raised"])
    return _died(contract, ending)


def _raised(contract: Contract, raised: dict[str, Any]) -> Effect:
    text = f"{raised['type']}: {raised['message']}"
    if raised["type"] == "MemoryError":
        memory = limits_for(contract).memory_mb
        return failed(TaxonomyClass.BUDGET_EXHAUSTED, "memory_limit", f"past its {memory} MB of memory", final=True)
    if sandboxed(contract) and raised.get("errno") in DENIED:
        return failed(TaxonomyClass.POLICY_VIOLATION, "sandbox_denied", f"the sandbox refused: {text}", final=True)
    return failed(TaxonomyClass.UNKNOWN_ERROR, "tool_raised", text, final=True)


def _died(contract: Contract, ending: Ending) -> Effect:
    code = ending.returncode
    if not ending.sent and not ending.killed_at_deadline:  # a spare died waiting: it never ran the call
        why = f"the tool's process ended before its call reached it ({code})"
        return failed(TaxonomyClass.DEPENDENCY_UNAVAILABLE, "tool_unready", why, final=False)
    if ending.killed_at_deadline:
        taxonomy, name, text = TaxonomyClass.TIMEOUT, "deadline_killed", "killed at its deadline"
    elif code in (-signal.SIGXCPU, -signal.SIGKILL):
        cpu = limits_for(contract).cpu_seconds
        taxonomy, name, text = TaxonomyClass.BUDGET_EXHAUSTED, "cpu_limit", f"killed past its {cpu} s of CPU"
    else:
        taxonomy, name, text = TaxonomyClass.UNKNOWN_ERROR, "crashed", f"its process ended without an answer ({code})"
    if contract.is_mutation and ending.sent:
        return Unknown(f"the tool's process was {text}: it may have acted")
    # A read killed at its deadline changed nothing: a later call may well succeed.
    return failed(taxonomy, name, f"the tool's process was {text}", final=taxonomy is not TaxonomyClass.TIMEOUT)
