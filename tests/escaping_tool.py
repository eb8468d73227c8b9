"""A python tool that tries to get out of its process's bounds, one way per call
(`arguments["attempt"]`): the runner's tests (tests/integration/test_python_runner.py) and the
sandbox's end-to-end test (tests/e2e/test_python_sandbox.py) run it as a tool."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from typing import Any

MB = 1024 * 1024


def escape(arguments: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
    attempt = arguments["attempt"]
    target = arguments.get("target", "")
    if attempt == "network":
        host, _, port = target.rpartition(":")
        with socket.create_connection((host, int(port)), timeout=2):
            return {"escaped": f"connected to {target}"}
    if attempt == "unix":
        with socket.socket(socket.AF_UNIX) as unix:
            unix.settimeout(2)
            unix.connect(target)
            return {"escaped": f"connected to {target}"}
    if attempt == "secret":
        return {"token": context.get("secrets", {}).get("token")}
    if attempt == "environment":
        return {"found": sorted(k for k in os.environ if k.startswith(("TOOLGATE_", "PG")))}
    if attempt == "read":
        with open(target, "rb") as file:
            return {"escaped": f"read {len(file.read())} bytes of {target}"}
    if attempt == "scratch":
        with open("note.txt", "w") as file:  # the scratch directory is the working directory
            file.write("mine")
        with open("note.txt") as file:
            return {"wrote": file.read(), "cwd": os.getcwd()}
    if attempt == "sleep":
        time.sleep(float(target or 60))
        return {"escaped": "slept past the deadline"}
    if attempt == "orphan":
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        with open(target, "w") as file:
            file.write(str(child.pid))
        time.sleep(60)
        return {"escaped": "slept past the deadline"}
    if attempt == "memory":
        hoard = bytearray(int(target or 2048) * MB)
        return {"escaped": f"allocated {len(hoard) // MB} MB"}
    if attempt == "spin":
        while True:
            pass
    if attempt == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    return {"attempt": attempt, "context": context}
