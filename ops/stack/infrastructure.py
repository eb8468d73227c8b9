"""The broker and Postgres `toolgate up` runs itself, unless the deployment names its own
(TOOLGATE_KAFKA_BOOTSTRAP, TOOLGATE_DATABASE_URL): the embedded Tansu or Apache Kafka's KRaft
nodes, and the embedded Postgres. Started on the home's ports (children.py, `Ports`), revived on
the same ports when one dies, and stopped with the stack."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from toolgate.ops.acls import AclPlan
from toolgate.ops.kafka_credentials import (
    ADMIN_USER,
    APPROVALS_PRINCIPAL,
    broker_security,
    client_environment,
    client_settings,
    describe_home,
    grant,
    roles,
    stage_user,
)
from toolgate.ops.stack.children import Ports
from toolgate.ops.stack.embedded import TANSU_FETCH_WAIT_MS, TANSU_IDLE_NAP_MS, Broker, start_broker
from toolgate.ops.stack.kafka_broker import KafkaCluster, start_cluster
from toolgate.ops.stack.kafka_classes import with_classes
from toolgate.ops.stack.kafka_dist import resolve as resolve_kafka
from toolgate.ops.stack.kafka_tls import ensure_certificates
from toolgate.ops.stack.postgres import Postgres, start_postgres
from toolgate.ops.stack.processes import stop_process
from toolgate.settings import Settings


@dataclass
class Infrastructure:
    settings: Settings
    say: Callable[[str], None]
    broker: Broker | None = None  # the embedded Tansu
    kafka: KafkaCluster | None = None  # or Apache Kafka's nodes (--broker kafka)
    postgres: Postgres | None = None
    restarts: dict[str, int] = field(default_factory=dict)  # by process, since `toolgate up` began

    def start_broker(self, ports: Ports) -> str:
        """The embedded broker (Tansu, or Apache Kafka's nodes), unless one is configured; its
        bootstrap address."""
        settings = self.settings
        home = settings.home
        if settings.kafka_bootstrap:
            self.say(f"broker     {settings.kafka_bootstrap}")
            return settings.kafka_bootstrap
        if settings.broker not in ("tansu", "kafka") or settings.brokers < 1:
            raise SystemExit(f"toolgate: --broker {settings.broker!r} --brokers {settings.brokers}: tansu or kafka, 1+")
        if settings.kafka_secure and settings.broker != "kafka":
            raise SystemExit("toolgate: --secure needs --broker kafka (the embedded Tansu has no authentication)")
        if settings.broker == "tansu":
            if settings.brokers != 1:
                raise SystemExit("toolgate: the embedded Tansu runs one node; --brokers needs --broker kafka")
            self.broker = start_broker(home / "logs" / "broker.log", ports.claim("broker"), settings.broker_cpus)
            self.say(f"broker     {self.broker.bootstrap}  (embedded Tansu, in memory{_on_cpus(self.broker.cpus)})")
            return self.broker.bootstrap
        jars = with_classes(
            resolve_kafka(settings.kafka_cache, settings.kafka_home, self.say), settings.kafka_cache, self.say
        )
        security, admin = None, {}
        if settings.kafka_secure:
            security = broker_security(ensure_certificates(home / "kafka" / "tls"), settings.secrets_path)
            admin = client_settings(ADMIN_USER, security.certificates, settings.secrets_path)
        self.kafka = start_cluster(
            home, settings.brokers, ports.claim, jars, settings.kafka_heap_mb, security=security, client=admin
        )
        if security is not None:
            describe_home(home, security.certificates, roles(AclPlan(tenants=())), [APPROVALS_PRINCIPAL])
        replication = self.kafka.replication
        self.say(
            f"broker     {self.kafka.bootstrap}  (Apache Kafka {jars.version} from {jars.source}, "
            f"{len(self.kafka.nodes)} node(s), replication {replication.factor}, min.insync.replicas "
            f"{replication.min_insync}; data in {self.kafka.root})"
        )
        return self.kafka.bootstrap

    def start_postgres(self, ports: Ports) -> str:
        """The embedded Postgres, unless one is configured; the tables' owner's URL."""
        admin_url = self.settings.admin_url
        if not admin_url:
            home = self.settings.home
            self.postgres = start_postgres(
                home / "pgdata",
                home / "logs" / "postgres.log",
                ports.claim("postgres"),
                secrets_dir=self.settings.secrets_path,
            )
            admin_url = self.postgres.url
            self.say(f"postgres   {admin_url}  (embedded, data in {home / 'pgdata'}; passwords required)")
        else:
            self.say(f"postgres   {mask(admin_url)}")
        return admin_url

    def grant(self, bootstrap: str, admin_url: str) -> list[str]:
        """Secured: every principal's credential and the ACL plan's bindings (ops/kafka_credentials.py)."""
        if self.kafka is None or self.kafka.security is None:
            return []
        return grant(replace(self.settings, kafka_bootstrap=bootstrap, database_url=admin_url), self.say)

    def principal(self, stage: str) -> dict[str, str]:
        """Secured: the environment that makes a stage connect as its own user."""
        if self.kafka is None or self.kafka.security is None:
            return {}
        return client_environment(stage_user(stage), self.kafka.security.certificates)

    def stage_defaults(self) -> dict[str, str]:
        """What a stage's settings default to on this broker: on the embedded Tansu, a short
        fetch wait (TANSU_FETCH_WAIT_MS) and naps when idle (TANSU_IDLE_NAP_MS); elsewhere the
        stages long-poll (settings `fetch_wait_ms`), and only those woken through Postgres nap
        (`woken_nap_ms`)."""
        if self.broker is None:
            return {}
        return {"TOOLGATE_FETCH_WAIT_MS": str(TANSU_FETCH_WAIT_MS), "TOOLGATE_IDLE_NAP_MS": str(TANSU_IDLE_NAP_MS)}

    def described(self, bootstrap: str, principals: list[str]) -> dict[str, Any]:
        """What runtime.json says of the broker: which one, its nodes' addresses (and, secured,
        where its CA is and which principals it has: never a password)."""
        if self.kafka is not None:
            described = self.kafka.describe()
            if "security" in described:
                described["security"]["principals"] = [f"User:{user}" for user in principals]
            return described
        if self.broker is not None:
            return {"broker": "tansu", "nodes": {"broker": bootstrap}}
        return {"broker": "external", "nodes": {}}

    def pids(self) -> dict[str, int]:
        return {
            **(self.kafka.pids() if self.kafka is not None else {}),
            **{
                name: proc.pid
                for name, proc in (
                    ("broker", self.broker and self.broker.process),
                    ("postgres", self.postgres and self.postgres.process),
                )
                if proc
            },
        }

    def revive(self) -> tuple[bool, bool]:
        """Start again, on its own port, whatever died, so every client reconnects by itself:
        Postgres recovers from its WAL and the workers' pools reconnect; a Kafka node comes back
        with its data. Whether anything was started, and whether the embedded Tansu was, which
        comes back empty (its topics, groups and producers forgotten)."""
        revived, emptied = False, False
        if self.postgres is not None and self.postgres.process.poll() is not None:
            self.say(
                f"postgres exited with {self.postgres.process.returncode}; restarting on port {self.postgres.port}"
            )
            self._restarted("postgres")
            self.postgres.respawn()
            revived = True
        if self.kafka is not None:
            for name in self.kafka.revive(self.say):
                self._restarted(name)
                revived = True
        if self.broker is not None and self.broker.process.poll() is not None:
            self.say(f"broker exited with {self.broker.process.returncode}; restarting on port {self.broker.port}")
            self._restarted("broker")
            self.broker = start_broker(
                self.settings.home / "logs" / "broker.log", self.broker.port, self.settings.broker_cpus
            )
            revived = emptied = True
        return revived, emptied

    def _restarted(self, name: str) -> None:
        self.restarts[name] = self.restarts.get(name, 0) + 1

    def stop(self) -> None:
        if self.postgres is not None:
            self.postgres.stop()
        if self.broker is not None:
            stop_process(self.broker.process)
        if self.kafka is not None:
            self.kafka.stop()


def _on_cpus(cpus: set[int] | None) -> str:
    if cpus is None:
        return ""
    return f", on CPU {','.join(map(str, sorted(cpus)))}"


def mask(url: str) -> str:
    """A database URL as it may be shown: its password replaced."""
    if "@" not in url or "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    creds, host = rest.rsplit("@", 1)
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}" if ":" in creds else url
