"""`toolgate mcp`: the MCP front door, over stdio or Streamable HTTP."""

from __future__ import annotations

import logging
import sys
from typing import Annotated

import typer

from toolgate.cli.common import running


def _host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise typer.BadParameter(f"{text!r} is not HOST:PORT")
    return host, int(port)


def mcp(
    agent: Annotated[
        str, typer.Option(help="stdio: the agent every call is signed as (its key in the local keyring)")
    ] = "cli",
    http: Annotated[
        str | None,
        typer.Option("--http", help="serve Streamable HTTP at HOST:PORT (/mcp), a bearer token per agent"),
    ] = None,
    wait_limit: Annotated[
        float, typer.Option("--wait-limit", help="seconds a call held for approval is waited for in one request")
    ] = 50.0,
    user: Annotated[str, typer.Option(help="the user the agents act for, as proposals name it")] = "mcp",
) -> None:
    """Serve toolgate's contracted tools over MCP: stdio for a desktop client (calls signed as
    --agent), or --http HOST:PORT for any MCP client with an agent's token (`toolgate agents token`)."""
    import anyio

    from toolgate.door.server import serve_http, serve_stdio
    from toolgate.door.session import Door

    # stdout is the protocol's over stdio: every log line goes to stderr.
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    from toolgate.trust.agent_keys import AgentKeyring

    settings = running()
    if http is None and not AgentKeyring(settings.agents_dir).has(agent):
        raise SystemExit(f"no signing key for agent {agent} in this host's keyring; name one with --agent")
    door = Door(settings, user_id=user, wait_limit_s=wait_limit)
    if http is None:
        anyio.run(serve_stdio, door, agent)
        return
    host, port = _host_port(http)
    anyio.run(serve_http, door, host, port)
