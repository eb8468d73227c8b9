"""The processes `toolgate up` starts (the stage workers and the demo provider), and the ports
of a home kept from one `toolgate up` to the next."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from toolgate.ops.stack.prepare import DEMO_TOKEN_REF
from toolgate.ops.stack.priority import lower_priority, niceness
from toolgate.ops.stack.processes import die_with_parent, free_port, port_free, wait_for_port
from toolgate.settings import Settings
from toolgate.workers.stages import STAGES


def yielding(children: list[Child]) -> str:
    """What `toolgate up` says of the stages that run at a lower priority (ops/stack/priority.py)."""
    lower = [f"{c.name} +{c.nice}" for c in children if c.nice]
    return f" (nice {', '.join(lower)})" if lower else ""


def _child_setup(nice: int) -> None:
    die_with_parent()
    lower_priority(nice)


@dataclass
class Child:
    name: str
    argv: list[str]
    env: dict[str, str]
    log: Path
    process: subprocess.Popen[bytes] | None = None
    restarts: int = 0  # in a row, for the backoff
    total_restarts: int = 0
    next_start: float = 0.0
    started_at: float = 0.0
    nice: int = 0  # how much lower its priority than ours (ops/stack/priority.py)

    def start(self) -> None:
        self.started_at = time.monotonic()
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(
                self.argv,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=partial(_child_setup, self.nice),
            )

    @property
    def pid(self) -> int:
        return self.process.pid if self.process else -1


class Ports:
    """The ports of a home's embedded broker, Postgres and demo provider, kept in `ports.json`
    so that `toolgate up` on an existing home listens where it listened before and connected
    clients reconnect by themselves. A port still held (the processes of a killed `toolgate up`
    take a moment to exit) is waited for; one that stays taken is replaced, and said so."""

    WAIT_S = 30.0

    def __init__(self, path: Path, say: Any = print) -> None:
        self.path = path
        self.say = say
        self.ports: dict[str, int] = json.loads(path.read_text()) if path.exists() else {}

    def claim(self, name: str) -> int:
        kept = self.ports.get(name)
        if kept and port_free(kept, self.WAIT_S):
            return kept
        port = free_port()
        if kept:
            self.say(f"{name} port {kept} is taken; using {port}")
        self.ports[name] = port
        self.path.write_text(json.dumps(self.ports))
        return port


def worker_env(
    settings: Settings, bootstrap: str, worker_url: str, endpoints: dict[str, str], defaults: dict[str, str]
) -> dict[str, str]:
    """A stage process's environment: where everything is, and never the owner's URL; the
    broker's defaults for the stages' settings (`Infrastructure.stage_defaults`), unless set."""
    env = {
        **{k: v for k, v in os.environ.items() if k != "TOOLGATE_ADMIN_DATABASE_URL"},
        "TOOLGATE_HOME": str(settings.home),
        "TOOLGATE_KAFKA_BOOTSTRAP": bootstrap,
        "TOOLGATE_DATABASE_URL": worker_url,
        "TOOLGATE_ENDPOINTS": json.dumps(endpoints),
        "TOOLGATE_PARTITIONS": str(settings.partitions),
        "TOOLGATE_TOPIC_PREFIX": settings.topic_prefix,
    }
    for name, value in defaults.items():
        env.setdefault(name, value)
    return env


def start_stages(
    settings: Settings, env: dict[str, str], ports: Ports, principal: Callable[[str], dict[str, str]]
) -> tuple[list[Child], dict[str, int]]:
    """One process per stage, each with its own `/metrics` port (kept in ports.json) and, on a
    secured cluster, its own principal's environment; the children and their metrics ports."""
    children: list[Child] = []
    metrics_ports: dict[str, int] = {}
    for stage in STAGES:
        metrics_ports[stage] = ports.claim(f"metrics-{stage}")
        child = Child(
            stage,
            [sys.executable, "-m", "toolgate.cli", "worker", stage],
            {**env, **principal(stage), "TOOLGATE_METRICS_PORT": str(metrics_ports[stage])},
            settings.home / "logs" / f"{stage}.log",
            nice=niceness(stage, settings.upstream_nice),
        )
        child.start()
        children.append(child)
    return children, metrics_ports


def start_provider(settings: Settings, port: int) -> tuple[Child, str]:
    """The demo provider on `port`, once it listens; the child and its URL."""
    home = settings.home
    child = Child(
        "provider",
        [
            sys.executable,
            "-m",
            "toolgate.cli",
            "provider",
            "--port",
            str(port),
            "--ledger",
            str(home / "provider" / "ledger.sqlite3"),
            "--token-file",
            str(settings.secrets_path / DEMO_TOKEN_REF),
        ],
        dict(os.environ),
        home / "logs" / "provider.log",
    )
    child.start()
    assert child.process is not None
    wait_for_port(port, 20.0, child.process)
    return child, f"http://127.0.0.1:{port}"


def start_console(settings: Settings, env: dict[str, str], database_url: str, port: int) -> tuple[Child, str]:
    """The approval console on `port`, once it listens; the child and its URL. It connects to
    Postgres with `database_url` (a login of toolgate_console, ops/roles.py) and to the broker as
    the approval service."""
    child = Child(
        "console",
        [sys.executable, "-m", "toolgate.cli", "console", "--port", str(port)],
        {**env, "TOOLGATE_DATABASE_URL": database_url, "TOOLGATE_CONSOLE_PORT": str(port)},
        settings.home / "logs" / "console.log",
    )
    child.start()
    assert child.process is not None
    wait_for_port(port, 30.0, child.process)
    return child, f"http://{settings.console_host}:{port}/"
