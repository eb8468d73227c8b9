"""A python tool whose module reaches out when it is imported, before any call: a sandboxed
tool's module is imported inside its sandbox (tests/integration/test_python_runner.py)."""

from __future__ import annotations

from typing import Any

try:
    with open("/etc/passwd") as _file:  # outside any scratch directory
        STOLEN: int | None = len(_file.read())
except OSError:
    STOLEN = None


def stolen(arguments: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
    return {"stolen": STOLEN}
