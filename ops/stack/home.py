"""The files of a home `toolgate up` keeps: its lock, held for the process's lifetime, and
`runtime.json`, which tells the other commands (and clients on this host) where everything is."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from pathlib import Path
from typing import Any, TextIO

from toolgate.settings import Settings


def claim_home(settings: Settings, fresh: bool) -> TextIO:
    """Hold the home's lock (the open file: keep it for the process's lifetime); with `fresh`,
    empty the home first."""
    home = settings.home
    home.mkdir(parents=True, exist_ok=True)
    lock = open(home / "up.lock", "w")  # noqa: SIM115 - held for our lifetime
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise SystemExit(f"toolgate up is already running for {home}") from None
    if fresh:
        for name in ("pgdata", "kafka", "provider", "ready", "telemetry", "logs", "metrics"):
            shutil.rmtree(home / name, ignore_errors=True)
        for password in settings.secrets_path.glob("kafka-scram-*"):  # the cluster's users
            password.unlink()
    for stale in (home / "ready").glob("*"):
        stale.unlink()
    return lock


def write_runtime(path: Path, runtime: dict[str, Any]) -> None:
    """runtime.json, replaced whole, readable by its owner only."""
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(runtime, f, indent=2)
    tmp.replace(path)
