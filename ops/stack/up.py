"""`toolgate up`: the whole pipeline from one command.

Starts (unless TOOLGATE_KAFKA_BOOTSTRAP / TOOLGATE_DATABASE_URL point elsewhere) the embedded
broker and Postgres, applies migrations, provisions the topic catalog, makes sure the
deployment secret exists, prepares the demo (tenants and their topics, agents and approvers
with their keys, the provider's token), starts the demo provider and one
process per stage (connected as the worker role, ops/roles.py; migrations and operators use the
tables' owner), writes `$TOOLGATE_HOME/runtime.json` for the other commands (pids and restart
counts), restarts a worker that dies, and on Ctrl-C or SIGTERM stops everything it started.
Every child also gets a parent-death signal, and a stage process orphaned anyway ends itself
(workers/runtime/orphan.py), so even a SIGKILLed `toolgate up` leaves no orphans.

The broker and Postgres it runs itself are ops/stack/infrastructure.py's. The broker is the
embedded Tansu (ops/stack/embedded.py) unless `--broker kafka` (TOOLGATE_BROKER) asks for Apache
Kafka: `--brokers` KRaft nodes with their data under the home
(ops/stack/kafka_broker.py), replicated as the cluster's size asks (topics/catalog.py `Replication`).

On an existing home it listens where it listened before (ports.json) and, when it had to
create the topics (Tansu forgets them), re-drives what Postgres holds in flight
(workers/reconciliation/redrive.py). An embedded Postgres or broker that dies is started again
on its port; after Tansu, which comes back empty, the stage workers are restarted and a re-drive
is done. A Kafka node that dies comes back with its data (its topics, records, committed offsets
and producer state), and the other nodes serve meanwhile where there are three: the workers'
clients reconnect by themselves, and nothing is re-driven. A `toolgate up` started again on a
home with a Kafka cluster finds every topic there, so it re-drives nothing either.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from toolgate.kafka_security import client_config
from toolgate.ops.agents import registered_tenants
from toolgate.ops.roles import CONSOLE_ROLE, WORKER_ROLE, embedded_role_url
from toolgate.ops.stack.children import Child, Ports, start_console, start_provider, start_stages, worker_env, yielding
from toolgate.ops.stack.home import claim_home, write_runtime
from toolgate.ops.stack.infrastructure import Infrastructure, mask
from toolgate.ops.stack.prepare import prepare, published_keys, redrive_from_postgres
from toolgate.settings import Settings
from toolgate.telemetry.metrics_export import reported_port
from toolgate.topics.catalog import provision
from toolgate.workers.stages import STAGES

STABLE_AFTER_S = 30.0
# How often the supervisor looks at its children (and the embedded broker and Postgres): a
# worker that died is started again within this. Four looks a second cost an idle stack CPU for
# nothing (docs/performance.md, "Figures behind the code").
SUPERVISE_S = 0.5
START_ATTEMPTS = 3  # a worker that dies this many times before it is ready stops `toolgate up`


@dataclass
class Supervisor:
    settings: Settings
    demo: bool = True
    fresh: bool = False
    out: TextIO = sys.stdout
    infra: Infrastructure = field(init=False)
    children: list[Child] = field(default_factory=list)
    _stop: bool = False
    _lock: Any = None
    _runtime: dict[str, Any] = field(default_factory=dict)
    _admin_url: str = ""
    _transport_lost: bool = False
    _metrics_ports: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.infra = Infrastructure(self.settings, self.say)

    @property
    def home(self) -> Path:
        return self.settings.home

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    # --- start -----------------------------------------------------------------------------

    def start(self) -> None:
        self._lock = claim_home(self.settings, self.fresh)
        ports = Ports(self.home / "ports.json", self.say)
        bootstrap = self.infra.start_broker(ports)
        # Operators' commands and migrations run as the tables' owner, workers as a role that may
        # only append to the audit log (ops/roles.py).
        admin_url = self.infra.start_postgres(ports)
        prepare(self.settings, bootstrap, admin_url, self.demo, self.say)
        principals = self.infra.grant(bootstrap, admin_url)
        worker_url, console_url = (
            (
                embedded_role_url(admin_url, self.settings.secrets_path, WORKER_ROLE),
                embedded_role_url(admin_url, self.settings.secrets_path, CONSOLE_ROLE),
            )
            if self.infra.postgres is not None
            else (self.settings.database_url or admin_url, self.settings.console_database_url or admin_url)
        )
        self.say(f"workers    connect as {mask(worker_url)}")
        endpoints = dict(self.settings.endpoints)
        if self.demo:
            provider, endpoints["demo_provider"] = start_provider(self.settings, ports.claim("provider"))
            self.children.append(provider)
            self.say(f"provider   {endpoints['demo_provider']}  (demo email and payment service)")
        runtime = {
            "kafka_bootstrap": bootstrap,
            "database_url": admin_url,
            "worker_database_url": worker_url,
            **published_keys(self.settings),
            "endpoints": endpoints,
            "partitions": self.settings.partitions,
            "topic_prefix": self.settings.topic_prefix,
            "broker_cluster": self.infra.described(bootstrap, principals),
            "pid": os.getpid(),
            "started_at": time.time(),
        }
        write_runtime(self.settings.runtime_file, runtime)
        self._admin_url = admin_url
        env = worker_env(self.settings, bootstrap, worker_url, endpoints, self.infra.stage_defaults())
        port = self.settings.console_port or ports.claim("console")  # the console's cards are linked to
        env["TOOLGATE_CONSOLE_URL"] = self.settings.console_url or f"http://{self.settings.console_host}:{port}"
        stages, self._metrics_ports = start_stages(self.settings, env, ports, self.infra.principal)
        self.children += stages
        console, url = start_console(self.settings, env, console_url, port)
        self.children.append(console)
        runtime |= {"console_host": self.settings.console_host, "console_port": port}
        runtime["console_url"] = env["TOOLGATE_CONSOLE_URL"]
        self.say(f"console    {url}  (approvals in the browser)")
        self._runtime = runtime
        self._record_pids()
        self._wait_ready()

    def _wait_ready(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        pending = {c.name for c in self.children if c.name in STAGES}
        while pending and time.monotonic() < deadline and not self._stop:
            for child in self.children:
                if (
                    child.name in pending
                    and (self.home / "ready" / f"{self.settings.topic_prefix}{child.name}.{child.pid}").exists()
                ):
                    pending.discard(child.name)
                if child.process is not None and child.process.poll() is not None:
                    # A worker that dies once while starting (it was killed) is started again;
                    # one that cannot start is a broken deployment: say so, and stop.
                    code = child.process.returncode
                    if child.restarts >= START_ATTEMPTS - 1:
                        raise SystemExit(f"worker {child.name} exited with {code}; see {child.log}")
                    child.restarts += 1
                    child.total_restarts += 1
                    self.say(f"{child.name} exited with {code} while starting; restarting")
                    child.start()
                    self._record_pids()
            time.sleep(0.2)
        if pending:
            raise SystemExit(f"workers not ready after {timeout}s: {', '.join(sorted(pending))}")
        stages = ", ".join(c.name for c in self.children if c.name in STAGES)
        self.say(f"workers    {stages}: ready{yielding(self.children)}")
        self._record_pids()  # with the metrics ports the workers reported
        self.say(f"metrics    {', '.join(f'{k} :{v}' for k, v in self._runtime['metrics'].items())}  (/metrics)")
        self.say(f"logs       {self.home / 'logs'}   telemetry {self.settings.telemetry_dir}")
        self.say(
            'toolgate is up. Try:  toolgate propose invoice.fetch --args \'{"invoice_id": "inv_acme0001"}\' --wait'
        )

    # --- supervise and stop ----------------------------------------------------------------

    def supervise(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._on_signal)
        while not self._stop:
            self._revive_infrastructure()
            self._publish_keys()
            now = time.monotonic()
            for child in self.children:
                if child.process is None or child.process.poll() is None or now < child.next_start:
                    continue
                if self._transport_lost and child.name in STAGES:
                    continue  # started once the broker's topics are back
                code = child.process.returncode
                # Crash loops back off; a worker that ran a while before dying starts afresh.
                child.restarts = 1 if now - child.started_at > STABLE_AFTER_S else child.restarts + 1
                child.total_restarts += 1
                backoff = min(30.0, 0.5 * 2 ** min(child.restarts - 1, 6))
                self.say(f"{child.name} exited with {code}; restarting (restart {child.restarts})")
                child.start()
                child.next_start = now + backoff
                self._record_pids()
            time.sleep(SUPERVISE_S)

    def _publish_keys(self) -> None:
        """The deployment's public keys in runtime.json as its keyset has them now (read again
        every `keyset_refresh_seconds`): clients on this host learn a staged key from it before
        any stage seals with it."""
        keys = published_keys(self.settings)
        if any(self._runtime.get(name) != value for name, value in keys.items()):
            self._runtime.update(keys)
            write_runtime(self.settings.runtime_file, self._runtime)

    @property
    def _restarts(self) -> dict[str, int]:
        return {**{c.name: c.total_restarts for c in self.children}, **self.infra.restarts}

    def _record_pids(self) -> None:
        self._runtime["workers"] = {c.name: c.pid for c in self.children}
        self._runtime["restarts"] = self._restarts
        self._runtime["metrics"] = self._metrics()
        self._runtime["infrastructure"] = self.infra.pids()
        write_runtime(self.settings.runtime_file, self._runtime)

    def _metrics(self) -> dict[str, int]:
        """Each worker's `/metrics` port: the one it reported listening on, else the one it got."""
        ports = dict(self._metrics_ports)
        for child in self.children:
            if child.name in ports:
                ports[child.name] = reported_port(self.settings, child.name, child.pid) or ports[child.name]
        return ports

    def _revive_infrastructure(self) -> None:
        """What died of the broker and Postgres comes back on its own port (infrastructure.py).
        Tansu comes back empty: the stage workers (whose consumer groups and producers it
        forgot) are stopped, the topics made again, what Postgres holds in flight re-driven, and
        the workers started; a step that fails (Postgres may be down too) is tried again on the
        next turn."""
        revived, emptied = self.infra.revive()
        if emptied:
            self._stop_workers()
            self._transport_lost = True
        if revived:
            self._record_pids()
        broker = self.infra.broker
        if self._transport_lost and broker is not None:
            try:
                provision(
                    broker.bootstrap,
                    self.settings.partitions,
                    self.settings.topic_prefix,
                    tenants=registered_tenants(self._admin_url),
                    client_config=client_config(self.settings),
                )
                redrive_from_postgres(self.settings, self._admin_url, self.say)
            except Exception as exc:  # Postgres or the broker not back yet: next turn
                self.say(f"re-drive   not yet: {exc}")
                time.sleep(1.0)
                return
            self._transport_lost = False
            for child in self.children:
                if child.name in STAGES:
                    child.start()
            self._record_pids()

    def _stop_workers(self) -> None:
        workers = [c for c in self.children if c.name in STAGES and c.process is not None]
        for child in workers:
            if child.process is not None and child.process.poll() is None:
                child.process.send_signal(signal.SIGTERM)
        for child in workers:
            assert child.process is not None
            try:
                child.process.wait(30)
            except subprocess.TimeoutExpired:
                child.process.kill()
                child.process.wait()

    def _on_signal(self, signum: int, _frame: Any) -> None:
        self._stop = True

    def stop(self) -> None:
        self.say("stopping ...")
        for child in self.children:
            if child.process is not None and child.process.poll() is None:
                child.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 30.0
        for child in self.children:
            if child.process is not None:
                try:
                    child.process.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    child.process.kill()
                    child.process.wait()
        self.infra.stop()
        self.settings.runtime_file.unlink(missing_ok=True)
        self.say("stopped")


def up(settings: Settings, demo: bool = True, fresh: bool = False) -> None:
    supervisor = Supervisor(settings, demo=demo, fresh=fresh)
    try:
        supervisor.start()
        supervisor.supervise()
    finally:
        supervisor.stop()
