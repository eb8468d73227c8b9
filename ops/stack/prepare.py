"""What a deployment needs before its workers start (`prepare`): migrations, the topic catalog,
the deployment secret; and for the demo, its tenants, agents and approvers with their keys, and
the provider's token. Used by `toolgate up` and `toolgate setup`."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import psycopg

from toolgate.kafka_security import ADMIN, client_config
from toolgate.ops.agents import add_tenant, list_agents, register_agent, registered_tenants
from toolgate.ops.approvers import Grant, list_approvers, register_approver
from toolgate.ops.migrate import migrate, seed_demo
from toolgate.secrets import SecretProvider, generate
from toolgate.settings import Settings
from toolgate.store import audit
from toolgate.topics.catalog import Topics, provision
from toolgate.trust.agent_keys import AgentKeyring
from toolgate.trust.integrity import deployment_keys
from toolgate.trust.signing import Keyring, new_key, public_bytes
from toolgate.workers.reconciliation.redrive import redrive

DEMO_TOKEN_REF = "demo-provider-token"
DEMO_TENANTS = ("acme", "globex")
DEMO_SCOPES = ["invoices:read", "invoices:write", "notify:send", "payments:charge"]
# Demo agents, each with a key in the local keyring: `cli` is who `toolgate propose` signs as.
DEMO_AGENTS = {"cli": "acme", "globex-cli": "globex"}
# Demo approvers: who may approve what, for which tenants. acme's finance has two controllers for
# dual control (alice, bob) and two directors (dave, erin: a charge over 5,000 USD needs both,
# contracts/cedar/arguments.cedar); carol, a billing lead, approves emails and medium-risk writes
# for both tenants. Each acts as the user of their own name: `toolgate propose --user alice`
# is alice's own call, which she may not approve (a self-approval is refused).
DEMO_APPROVERS = {
    "alice": (["HIGH_RISK_EXTERNAL", "CRITICAL_MUTATION"], ["finance-controllers", "billing-leads"], ["acme"]),
    "bob": (["HIGH_RISK_EXTERNAL", "CRITICAL_MUTATION"], ["finance-controllers"], ["acme"]),
    "carol": (["HIGH_RISK_EXTERNAL", "MEDIUM_RISK_WRITE"], ["billing-leads"], ["acme", "globex"]),
    "dave": (["HIGH_RISK_EXTERNAL", "CRITICAL_MUTATION"], ["finance-directors"], ["acme"]),
    "erin": (["HIGH_RISK_EXTERNAL", "CRITICAL_MUTATION"], ["finance-directors"], ["acme"]),
}


def prepare(settings: Settings, bootstrap: str, database_url: str, demo: bool, say: Any = print) -> None:
    """Everything a deployment needs before its workers start: migrations, the topic catalog
    (each registered tenant's topics too), the deployment secret, and (for the demo) tenants,
    agents and approvers with keys, and the provider's token. All as the tables' owner
    (`admin_database_url` when set, else `database_url`)."""
    database_url = settings.admin_database_url or database_url
    settings = replace(settings, kafka_bootstrap=bootstrap, database_url=database_url)
    applied = migrate(database_url)
    say(f"migrations {', '.join(applied) if applied else 'up to date'}")
    tenants = registered_tenants(database_url)
    created = provision(
        bootstrap,
        settings.partitions,
        settings.topic_prefix,
        tenants=tenants,
        client_config=client_config(settings, ADMIN),
    )
    say(f"topics     {len(created)} created, {settings.partitions} partitions each")
    if not SecretProvider(settings.secrets_path).has(settings.deployment_secret_ref):
        path = ensure_secret(settings, settings.deployment_secret_ref)
        say(f"secret     deployment secret generated at {path}; give it to every worker host")
    keys = deployment_keys(settings)
    say(f"signing    deployment public key {keys.public_key.hex()} ({keys.key_id})")
    audit.use_keyset(keys)  # what signs this process's audit checkpoints
    if Topics(settings.topic_prefix).proposals in created:
        redrive_from_postgres(settings, database_url, say)
    if demo:
        seed_demo(database_url)
        demo_agents(settings, say)
        demo_approvers(settings, database_url, say)
        ensure_secret(settings, DEMO_TOKEN_REF)


def redrive_from_postgres(settings: Settings, database_url: str, say: Any = print) -> dict[str, int]:
    """The transport is new (its topics had to be created): say again what Postgres holds in
    flight (workers/reconciliation/redrive.py). On a new database there is nothing."""
    audit.use_keyset(deployment_keys(settings))

    async def one() -> dict[str, int]:
        async with await psycopg.AsyncConnection.connect(database_url) as conn, conn.transaction():
            return await redrive(conn, Topics(settings.topic_prefix), rewind_outbox=True)

    counts = asyncio.run(one())
    if any(counts.values()):
        say(f"re-drive   {', '.join(f'{k} {v}' for k, v in counts.items())}  (the broker had lost them)")
    return counts


def published_keys(settings: Settings) -> dict[str, Any]:
    """What runtime.json says of the deployment's keys: the public key that signs now, and every
    one accepted now (a staged next key, a previous one in its grace), for clients to trust."""
    keys = deployment_keys(settings)
    return {
        "deployment_public_key": keys.public_key.hex(),
        "deployment_public_keys": [public.hex() for public in keys.public_keys()],
    }


def ensure_secret(settings: Settings, ref: str) -> Path:
    """A random secret under the secrets directory (readable by the owner only), once."""
    return generate(settings.secrets_path, ref)


def demo_agents(settings: Settings, say: Any = print) -> None:
    """The demo tenants (with their topics) and an agent for each, with a key in the local
    keyring (made once; an agent already registered is left as the operator left it)."""
    for tenant in DEMO_TENANTS:
        add_tenant(settings, tenant, actor="toolgate-up")
    keyring = AgentKeyring(settings.agents_dir)
    registered = {a["agent"] for a in list_agents(settings)}
    for agent, tenant in DEMO_AGENTS.items():
        if agent in registered:
            continue
        key = new_key()
        register_agent(settings, agent, tenant, DEMO_SCOPES, public_bytes(key), actor="toolgate-up")
        keyring.store(agent, tenant, DEMO_SCOPES, key)
    say(f"agents     {', '.join(f'{a} ({t})' for a, t in DEMO_AGENTS.items())}  (keys in {keyring.directory})")


def demo_approvers(settings: Settings, database_url: str, say: Any = print) -> None:
    """The demo approvers, each with a key in the local keyring and acting as the user of its own
    name, registered once: an approver already registered is left as the operator left it (its
    key, groups, tenants, users and revocation)."""
    keyring = Keyring(settings.home / "approvers")
    registered = {a["approver"] for a in list_approvers(replace(settings, database_url=database_url))}
    for name, (risk_classes, groups, tenants) in DEMO_APPROVERS.items():
        if name in registered:
            continue
        key = keyring.load(name) if keyring.has(name) else new_key()
        public_key = public_bytes(key)
        register_approver(database_url, name, public_key, Grant(risk_classes, groups, tenants, [name]), "toolgate-up")
        if not keyring.has(name):
            keyring.store(name, key)
    served = ", ".join(f"{a} ({'+'.join(t)})" for a, (_, _, t) in DEMO_APPROVERS.items())
    say(f"approvers  {served}  (keys in {keyring.directory})")
