"""The agents' verbs: `propose` a call, `observe` the answers, `compensate` an earlier call."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from toolgate.cli.common import console, literal, print_json, running

if TYPE_CHECKING:
    from toolgate.client import Proposed, ToolgateClient


def _agent_tenant(agent: str) -> str:
    """The tenant an agent in the local keyring was registered for."""
    from toolgate.trust.agent_keys import AgentKeyring

    try:
        return str(AgentKeyring(running().agents_dir).meta(agent)["tenant_id"])
    except KeyError as exc:
        raise SystemExit(f"{exc.args[0]}; or name the tenant with --tenant") from None


def propose(
    tool: Annotated[str, typer.Argument(help="tool name, e.g. invoice.fetch")],
    args: Annotated[str, typer.Option("--args", help="the arguments as the model wrote them (JSON text)")] = "{}",
    agent: Annotated[str, typer.Option(help="the agent that signs (its key must be in the local keyring)")] = "cli",
    tenant: Annotated[str | None, typer.Option(help="tenant the call claims (default: the agent's own)")] = None,
    user: Annotated[str, typer.Option(help="user the agent acts for")] = "user-1",
    scopes: Annotated[
        str | None, typer.Option(help="comma-separated scopes requested (default: all the agent was granted)")
    ] = None,
    run_id: Annotated[str | None, typer.Option("--run-id")] = None,
    workflow_id: Annotated[str | None, typer.Option("--workflow-id")] = None,
    operation_id: Annotated[
        str | None, typer.Option("--operation-id", help="logical operation id (same id = same operation)")
    ] = None,
    idempotency_key: Annotated[str | None, typer.Option("--idempotency-key")] = None,
    version: Annotated[str, typer.Option(help="exact, MAJOR.x or latest")] = "latest",
    deadline_s: Annotated[float | None, typer.Option("--deadline-s", help="answer within this many seconds")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run")] = False,
    wait: Annotated[bool, typer.Option(help="wait for the final observation and print it")] = False,
    timeout: Annotated[float, typer.Option(help="seconds to wait")] = 60.0,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
) -> None:
    """Publish a tool-call proposal, signed as the agent; print its call_id (with --wait, its observation)."""
    from toolgate.client import ToolgateClient
    from toolgate.kafka_security import agent_role

    client = ToolgateClient.from_settings(role=agent_role(agent))
    sent = client.propose(
        tool,
        args,
        agent_id=agent,
        tenant_id=tenant,
        user_id=user,
        scopes=[s for s in scopes.split(",") if s] if scopes is not None else None,
        run_id=run_id,
        workflow_id=workflow_id,
        logical_operation_id=operation_id,
        idempotency_key=idempotency_key,
        version=version,
        deadline_ms=int((time.time() + deadline_s) * 1000) if deadline_s else None,
        dry_run=dry_run,
        watch=wait,
    )
    if wait:
        _print_answer(client, sent, timeout, as_json)
    elif as_json:
        print_json({"call_id": sent.call_id, "run_id": sent.run_id, "traceparent": sent.traceparent})
    else:
        console.print(literal(f"call_id {sent.call_id}  run_id {sent.run_id}"))


def _print_answer(client: ToolgateClient, sent: Proposed, timeout: float, as_json: bool) -> None:
    """Wait for a proposal's final observation and print it (exit 2 when none comes in time)."""
    try:
        seen = client.wait(sent, timeout=timeout)
    except TimeoutError as exc:
        console.print(f"[red]{escape(str(exc))}[/red]")
        raise typer.Exit(2) from exc
    if as_json:
        print_json({"call_id": sent.call_id, "run_id": sent.run_id, "observation": seen.as_json()})
    else:
        console.print(literal(f"call_id {sent.call_id}  run_id {sent.run_id}"))
        console.print_json(data=seen.as_json())


def observe(
    run_id: Annotated[str | None, typer.Option("--run-id")] = None,
    call_id: Annotated[str | None, typer.Option("--call-id")] = None,
    tenant: Annotated[str | None, typer.Option(help="whose observations (default: the agent's tenant)")] = None,
    agent: Annotated[str, typer.Option(help="the local agent whose tenant to read")] = "cli",
    follow: Annotated[bool, typer.Option(help="keep waiting for new observations")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object per line")] = False,
) -> None:
    """Print a tenant's observations (all, one run's, or one call's), each checked against the
    deployment's signature."""
    from toolgate.client import ToolgateClient
    from toolgate.kafka_security import agent_role

    client = ToolgateClient.from_settings(role=agent_role(agent))
    for seen in client.observations(
        tenant_id=tenant or _agent_tenant(agent),
        run_id=run_id,
        call_ids=[call_id] if call_id else None,
        follow=follow,
    ):
        if as_json:
            print_json({"run_id": seen.run_id, "call_id": seen.call_id, "observation": seen.as_json()})
        else:
            status = seen.observation.status
            # The run and call ids are the agent's: text, never markup.
            console.print(
                literal(
                    f"{seen.run_id}  {seen.call_id}  {seen.observation.tool_identity.name}  "
                    f"{status.taxonomy_class} ({status.code})"
                ),
                soft_wrap=True,  # never broken by the console: the ids are copied whole
            )


def compensate(
    call_id: Annotated[str, typer.Argument(help="the call whose committed effect to undo")],
    tenant: Annotated[str | None, typer.Option(help="the call's tenant, if its call_id is not unique")] = None,
    agent: Annotated[
        str | None, typer.Option(help="agent of the tenant that signs (default: the agent that made the call)")
    ] = None,
    wait: Annotated[bool, typer.Option(help="wait for the compensation's observation")] = True,
    timeout: Annotated[float, typer.Option()] = 60.0,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Run the compensation tool of an earlier call through the pipeline (it is then COMPENSATED)."""
    from toolgate.ops.compensate import compensate as run_compensation

    settings = running()
    sent, client = run_compensation(settings, call_id, tenant, agent)
    observation = client.wait(sent, timeout=timeout).as_json() if wait else None
    if as_json:
        print_json({"call_id": sent.call_id, "compensation_of": call_id, "observation": observation})
    else:
        console.print(literal(f"compensation call_id {sent.call_id} for {call_id}"))
        if observation is not None:
            console.print_json(data=observation)
