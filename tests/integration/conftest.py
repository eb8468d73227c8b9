"""The integration tier's own infrastructure, for tests that need less than the whole pipeline.

`postgres` is one embedded Postgres server for the session (ops/stack/embedded.py, as `toolgate up`
starts it) with a template database, `toolgate_template`: every migration applied, and the demo
registries `toolgate up` prepares (tenants, the agents `cli` and `globex-cli` and the approvers,
their keys in the session's home beside the deployment secret; customers and invoices).
`database` clones the template for each test module (`CREATE DATABASE ... TEMPLATE`, a file
copy), so no module sees another's rows; `Server.scratch()` gives one test a clone of its own.
`broker` is one embedded broker for the session (Tansu, or Apache Kafka's nodes under
TOOLGATE_TEST_BROKER=kafka, as tests/conftest.py `session_broker` says), and `topic_prefix` a
topic catalog under a prefix of each module's own.

Nothing here starts a worker: a test that goes through the running stages uses `pipeline`
(tests/conftest.py) and shares its database and topics by nature.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import psycopg
import pytest
from psycopg import sql

from toolgate.ops.agents import register_agent
from toolgate.ops.migrate import migrate, migration_files, seed_demo
from toolgate.ops.roles import with_database
from toolgate.ops.stack.embedded import Broker, start_broker
from toolgate.ops.stack.kafka_broker import KafkaCluster, start_cluster
from toolgate.ops.stack.kafka_dist import resolve
from toolgate.ops.stack.postgres import Postgres, start_postgres
from toolgate.ops.stack.prepare import (
    DEMO_AGENTS,
    DEMO_SCOPES,
    DEMO_TENANTS,
    DEMO_TOKEN_REF,
    demo_approvers,
    ensure_secret,
)
from toolgate.ops.stack.processes import free_port
from toolgate.settings import Settings, load_settings
from toolgate.topics.catalog import provision
from toolgate.trust.agent_keys import AgentKeyring
from toolgate.trust.signing import new_key, public_bytes

from ..conftest import session_broker

TEMPLATE = "toolgate_template"


@dataclass(frozen=True)
class Database:
    """One database on the session's server, and the home whose keys its registries hold."""

    database_url: str
    home: Path

    @property
    def settings(self) -> Settings:
        return Settings(database_url=self.database_url, home=self.home)

    def sql(self, query: str, params: Any = None) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.database_url, autocommit=True) as conn:
            cur = conn.execute(query, params)
            return cur.fetchall() if cur.description else []


@dataclass(frozen=True)
class Server:
    """The session's Postgres server: databases cloned from the template, or empty ones."""

    postgres: Postgres
    home: Path

    def url(self, database: str = "postgres") -> str:
        return with_database(self.postgres.url, database)

    def create(self, label: str, template: str | None = TEMPLATE) -> Database:
        """A new database named after `label`: a clone of `template`, or (None) an empty one."""
        name = f"tg_{label}_{uuid.uuid4().hex[:8]}"[:63]
        statement = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
        if template is not None:
            statement = sql.SQL("{} TEMPLATE {}").format(statement, sql.Identifier(template))
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(statement)
        return Database(self.url(name), self.home)

    def drop(self, database: Database) -> None:
        name = unquote(urlsplit(database.database_url).path.lstrip("/"))
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))

    @contextmanager
    def scratch(self, label: str, template: str | None = TEMPLATE) -> Iterator[Database]:
        database = self.create(label, template)
        try:
            yield database
        finally:
            self.drop(database)


def migrated_before(conn: psycopg.Connection[Any], first: str) -> None:
    """Apply the migrations named before `first` and record them as `migrate` does: a database as a
    release before that migration left it (on an autocommit connection)."""
    conn.execute(
        "CREATE TABLE public.toolgate_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
    )
    for name, text in migration_files():
        if name >= first:
            break
        conn.execute(text.encode())
        conn.execute("INSERT INTO public.toolgate_migrations (name) VALUES (%s)", (name,))


def prepare_template(settings: Settings) -> None:
    """What `toolgate up` prepares in its database (ops/stack/up.py `prepare`), less the topics: the
    migrations, the demo data, the demo tenants, agents and approvers, and the secrets."""
    url = settings.database_url
    migrate(url)
    seed_demo(url)
    ensure_secret(settings, settings.deployment_secret_ref)
    ensure_secret(settings, DEMO_TOKEN_REF)
    with psycopg.connect(url, autocommit=True) as conn:
        for tenant in DEMO_TENANTS:  # `toolgate tenants add` would also make their topics: no broker here
            conn.execute("INSERT INTO toolgate.tenants (tenant_id) VALUES (%s)", (tenant,))
    keyring = AgentKeyring(settings.agents_dir)
    for agent, tenant in DEMO_AGENTS.items():
        key = new_key()
        register_agent(settings, agent, tenant, DEMO_SCOPES, public_bytes(key), actor="pytest")
        keyring.store(agent, tenant, DEMO_SCOPES, key)
    demo_approvers(settings, url, say=lambda _: None)


@pytest.fixture(scope="session")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("postgres")
    home = root / "home"
    server = start_postgres(root / "pgdata", root / "postgres.log", secrets_dir=home / "secrets")
    try:
        with psycopg.connect(server.url, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(TEMPLATE)))
        url = with_database(server.url, TEMPLATE)
        prepare_template(Settings(database_url=url, home=home))
        yield Server(server, home)
    finally:
        server.stop()


def _module_label(request: pytest.FixtureRequest) -> str:
    return request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")


@pytest.fixture(scope="module")
def database(postgres: Server, request: pytest.FixtureRequest) -> Iterator[Database]:
    """This module's own clone of the template database."""
    with postgres.scratch(_module_label(request)) as database:
        yield database


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker | KafkaCluster]:
    kind, nodes = session_broker()
    started: Broker | KafkaCluster
    if kind == "kafka":
        settings = load_settings(use_runtime=False)
        jars = resolve(settings.kafka_cache, settings.kafka_home)
        home = tmp_path_factory.mktemp("kafka")
        started = start_cluster(home, nodes, lambda _: free_port(), jars, settings.kafka_heap_mb)
    else:
        started = start_broker(tmp_path_factory.mktemp("broker") / "broker.log")
    try:
        yield started
    finally:
        started.stop()


def fresh_topics(broker: Broker | KafkaCluster, label: str, partitions: int = 2) -> str:
    """The topic catalog under a new prefix of `label`'s on `broker`; the prefix."""
    prefix = f"{label}{uuid.uuid4().hex[:6]}."
    provision(broker.bootstrap, partitions, prefix)
    return prefix


@pytest.fixture(scope="module")
def topic_prefix(broker: Broker, request: pytest.FixtureRequest) -> str:
    """This module's own topic catalog (two partitions) on the session's broker."""
    return fresh_topics(broker, _module_label(request).replace("_", "-"))


def with_topics(database: Database, broker: Broker | KafkaCluster, prefix: str) -> Settings:
    """The settings of a process working on `database` and the catalog under `prefix`."""
    return replace(database.settings, kafka_bootstrap=broker.bootstrap, topic_prefix=prefix)
