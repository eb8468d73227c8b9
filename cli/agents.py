"""Who may propose: `tenants add|list|domains` and `agents add|rotate|revoke|list`."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from toolgate.cli.common import console, print_json, print_rows, registry_call, running

tenants_app = typer.Typer(no_args_is_help=True, help="Tenants: registered once, each with its own edge topics.")
agents_app = typer.Typer(no_args_is_help=True, help="Agents: who may propose, for which tenant, with which keys.")

SCOPES_OPTION = typer.Option(help="comma-separated scopes granted, e.g. invoices:read,invoices:write")
PUBLIC_KEY_OPTION = typer.Option(
    "--public-key", help="the agent's Ed25519 public key (PEM or hex); its private key never leaves the agent's host"
)


@tenants_app.command("add")
def tenants_add(tenant: str, actor: Annotated[str, typer.Option("--as")] = "operator") -> None:
    """Register a tenant and create its edge topics (observations, confirmation packets)."""
    from toolgate.ops.agents import add_tenant

    created = registry_call(add_tenant, running(), tenant, actor)
    console.print(f"tenant {tenant} registered; topics created: {', '.join(created) or 'none, all present'}")


@tenants_app.command("list")
def tenants_list(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    from toolgate.ops.agents import registered_tenants

    tenants = registered_tenants(running().database_url)
    print_json(tenants) if as_json else console.print("\n".join(tenants) or "no tenants")


@tenants_app.command("domains")
def tenants_domains(
    tenant: str,
    names: Annotated[
        str | None, typer.Option("--set", help='comma-separated mail domains, e.g. acme.com,acme.co.uk ("" clears)')
    ] = None,
    actor: Annotated[str, typer.Option("--as")] = "operator",
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Show a tenant's own mail domains, or set them with --set (audited): policies see them as
    the tenant's `domains`, and an e-mail to any other domain is outside the tenant."""
    from toolgate.ops.agents import set_domains, tenant_domains

    settings = running()
    if names is None:
        domains = registry_call(tenant_domains, settings.database_url, tenant)
    else:
        domains = registry_call(set_domains, settings, tenant, names.split(","), actor)
    if as_json:
        print_json(domains)
        return
    console.print(f"tenant {tenant}'s mail domains: {', '.join(domains) or 'none'}")


@agents_app.command("add")
def agents_add(
    agent: str,
    tenant: Annotated[str, typer.Option(help="the tenant the agent acts for (registered)")],
    scopes: Annotated[str, SCOPES_OPTION] = "",
    public_key: Annotated[Path | None, PUBLIC_KEY_OPTION] = None,
    actor: Annotated[str, typer.Option("--as")] = "operator",
) -> None:
    """Register an agent: its tenant, its granted scopes and an Ed25519 key (a new pair, the
    private key into the local keyring, or the public key of one kept elsewhere). On a home
    `toolgate up --secure` runs, the agent's Kafka user gets its SCRAM credential (its password
    in the home's secrets) and its ACL bindings at once, as `toolgate up` gives the demo agents."""
    from toolgate.kafka_security import HOME_SECURITY
    from toolgate.ops.agents import add_agent

    settings = running()
    key_id, path = registry_call(
        add_agent, settings, agent, tenant, [s for s in scopes.split(",") if s], public_key, actor
    )
    where = f"private key at {path}" if path else "public key registered"
    console.print(f"agent {agent} registered for tenant {tenant}: key {key_id}, {where}")
    if (settings.home / HOME_SECURITY).is_file():
        from toolgate.ops.kafka_credentials import grant

        grant(replace(settings, database_url=settings.admin_url), console.print)


@agents_app.command("rotate")
def agents_rotate(
    agent: str,
    public_key: Annotated[Path | None, PUBLIC_KEY_OPTION] = None,
    actor: Annotated[str, typer.Option("--as")] = "operator",
) -> None:
    """Add a key to an agent; its other keys stay active until revoked."""
    from toolgate.ops.agents import rotate

    key_id, path = registry_call(rotate, running(), agent, public_key, actor)
    console.print(f"agent {agent}: new key {key_id}" + (f", private key at {path}" if path else ""))


@agents_app.command("revoke")
def agents_revoke(
    agent: str,
    key: Annotated[str | None, typer.Option("--key", help="revoke only this key id")] = None,
    actor: Annotated[str, typer.Option("--as")] = "operator",
) -> None:
    """Revoke an agent (or one of its keys) for good: its proposals are refused from now on, and
    an agent's MCP tokens are revoked with it. A revoked agent or key is never made active again."""
    from toolgate.ops.agents import revoke
    from toolgate.trust.agent_keys import AgentKeyring

    settings = running()
    count = registry_call(revoke, settings, agent, key, actor)
    AgentKeyring(settings.agents_dir).forget(agent, key)
    said = f"key {key} revoked" if key else f"revoked with its {count} active key(s) and its tokens"
    console.print(f"agent {agent}: {said}")


@agents_app.command("token")
def agents_token(
    agent: str,
    revoke: Annotated[bool, typer.Option("--revoke", help="revoke the agent's tokens (or --token-id's)")] = False,
    token_id: Annotated[str | None, typer.Option("--token-id", help="with --revoke: only this token")] = None,
    list_: Annotated[bool, typer.Option("--list", help="list the agent's tokens by id and status")] = False,
    actor: Annotated[str, typer.Option("--as")] = "operator",
) -> None:
    """Issue a bearer token for the MCP front door over HTTP (`toolgate mcp --http`), shown once:
    only its hash is kept. With --revoke, retire the agent's tokens (a revoked agent's too: its
    tokens were revoked with it); with --list, show them."""
    from toolgate.ops.agent_tokens import issue, listed
    from toolgate.ops.agent_tokens import revoke as revoke_tokens

    settings = running()
    if list_:
        print_json(registry_call(listed, settings, agent))
        return
    if revoke:
        count = registry_call(revoke_tokens, settings, agent, token_id, actor)
        console.print(f"agent {agent}: {count} token(s) revoked")
        return
    token, issued_id = registry_call(issue, settings, agent, actor)
    print_json({"agent": agent, "token_id": issued_id, "token": token})


@agents_app.command("list")
def agents_list(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    from toolgate.ops.agents import list_agents

    print_rows(
        list_agents(running()),
        as_json,
        lambda r: (
            f"{r['agent']:16} {r['tenant']:10} {r['status']:8} keys={','.join(r['active_keys']) or '-'}  "
            f"scopes={','.join(r['scopes'])}"
        ),
    )
