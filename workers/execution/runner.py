"""The child process a python tool runs in: `python -P -m toolgate.workers.execution.runner`.

It reads one line of JSON on stdin, its setup (`callable`, `limits`, `sandbox`, `scratch`), and
before any call sets its resource limits (address space, CPU seconds, open files, file size, no
core dumps); sandboxed, it leaves the network (a network namespace of its own, whose only
interface, loopback, is down), restricts its filesystem to reading the interpreter, its
libraries and the tool's code and writing its scratch directory (landlock.py), and may create
no Unix socket (seccomp.py); then it imports the tool, so what the tool's module does at import
is confined too (only its parent packages' `__init__` run before). It answers one line,
`{"ready": true}` or why it cannot run. Then it reads one call, `{"arguments", "context"}`,
runs `fn(arguments, context)` (sync or async) and answers one line: `{"ok": value}` or
`{"raised": {"type", "errno", "message"}}`, and exits. One process runs one call: nothing a
call leaves behind (state, files, threads) reaches another.

Its standard output is the parent's channel only: what the tool prints goes to standard error.
Its parent kills its whole process group at the call's deadline (children.py).
"""

from __future__ import annotations

import ctypes
import importlib
import importlib.util
import inspect
import json
import os
import resource
import signal
import sys
import sysconfig
from typing import Any, TextIO

CLONE_NEWUSER, CLONE_NEWNET = 0x10000000, 0x40000000
PR_SET_PDEATHSIG = 1
MB = 1024 * 1024


def set_limits(limits: dict[str, int]) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_AS, (limits["memory_mb"] * MB,) * 2)
    resource.setrlimit(resource.RLIMIT_CPU, (limits["cpu_seconds"], limits["cpu_seconds"] + 1))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits["open_files"],) * 2)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits["file_size_mb"] * MB,) * 2)


def leave_network() -> None:
    """A network namespace of this process's own: no route anywhere, not even the host's
    loopback. Root may make one; anyone else makes a user namespace first."""
    libc = ctypes.CDLL(None, use_errno=True)
    flags = CLONE_NEWNET if os.geteuid() == 0 else CLONE_NEWUSER | CLONE_NEWNET
    if libc.unshare(flags) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"unshare: {os.strerror(errno)}")


def readable() -> list[str]:
    """What a sandboxed tool may read: the interpreter, its standard library and installed
    packages, the system's shared libraries, and the few devices Python opens."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    paths |= {sysconfig.get_path(name) for name in ("stdlib", "platstdlib", "purelib", "platlib")}
    paths |= {"/usr/lib", "/usr/lib64", "/lib", "/lib64", "/etc/ld.so.cache", "/dev/null", "/dev/urandom"}
    return sorted(p for p in paths if p)


def code_of(module_name: str) -> list[str]:
    """Where a sandboxed tool's code is read from: its module's directory and every package
    already imported (its parents, this runner's own), found without running the module."""
    parent = module_name.rpartition(".")[0]
    if parent:
        importlib.import_module(parent)
    found = importlib.util.find_spec(module_name)
    dirs = [os.path.dirname(found.origin)] if found is not None and found.origin else []
    return dirs + [p for m in list(sys.modules.values()) for p in getattr(m, "__path__", None) or []]


def enter_sandbox(scratch: str, code: list[str]) -> None:
    from toolgate.workers.execution import landlock, seccomp

    leave_network()
    landlock.restrict([*readable(), *code], [scratch])
    seccomp.forbid_unix_sockets()


def setup(spec: dict[str, Any]) -> Any:
    """Limits, the sandbox (if asked), the tool, in that order: a sandboxed tool's module is
    imported confined (only its parent packages' __init__ run before)."""
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    set_limits(spec["limits"])
    os.chdir(spec["scratch"])
    os.environ.update({"TMPDIR": spec["scratch"], "HOME": spec["scratch"]})
    module_name, _, attr = spec["callable"].partition(":")
    if spec["sandbox"]:  # before the tool's module runs: what it does at import is confined too
        enter_sandbox(spec["scratch"], code_of(module_name))
    return getattr(importlib.import_module(module_name), attr)


def call(fn: Any, arguments: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
    try:
        if inspect.iscoroutinefunction(fn):
            import asyncio  # only for an async tool: its import is half a process's start (~50 ms)

            value = asyncio.run(fn(arguments, context))
        else:
            value = fn(arguments, context)
    except BaseException as exc:  # whatever the tool raised is its answer
        return {"raised": {"type": type(exc).__name__, "errno": getattr(exc, "errno", None), "message": str(exc)}}
    return {"ok": value if isinstance(value, dict) else {"value": value}}


def answer(out: TextIO, message: dict[str, Any]) -> None:
    try:
        line = json.dumps(message, default=str)
    except (TypeError, ValueError) as exc:
        line = json.dumps({"raised": {"type": type(exc).__name__, "errno": None, "message": "not JSON"}})
    out.write(line + "\n")
    out.flush()


def main() -> None:
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        fn = setup(json.loads(sys.stdin.readline()))
    except Exception as exc:  # a tool that cannot be set up is said so, never a trace
        answer(out, {"unready": {"type": type(exc).__name__, "message": str(exc)}})
        return
    answer(out, {"ready": True})
    line = sys.stdin.readline()
    if not line:
        return  # the worker stopped: the spare was never used
    request = json.loads(line)
    answer(out, call(fn, request["arguments"], request["context"]))


if __name__ == "__main__":
    main()
