"""The `toolgate` command: one front for the pipeline, the agents' and the operators' verbs."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from toolgate.cli_contracts import contracts_app
from toolgate.settings import load_settings

app = typer.Typer(
    no_args_is_help=True, add_completion=False, help="toolgate: the deterministic edge for agents' tool calls."
)
approvals_app = typer.Typer(no_args_is_help=True, help="Held calls: list, show the confirmation card, approve, deny.")
approvers_app = typer.Typer(no_args_is_help=True, help="Approvers and their signing keys.")
tenants_app = typer.Typer(no_args_is_help=True, help="Tenants: registered once, each with its own edge topics.")
agents_app = typer.Typer(no_args_is_help=True, help="Agents: who may propose, for which tenant, with which keys.")
dlq_app = typer.Typer(no_args_is_help=True, help="The dead-letter topic: list, show, replay, discard.")
audit_app = typer.Typer(no_args_is_help=True, help="The hash-chained audit log.")
app.add_typer(approvals_app, name="approvals")
app.add_typer(approvers_app, name="approvers")
app.add_typer(tenants_app, name="tenants")
app.add_typer(agents_app, name="agents")
app.add_typer(dlq_app, name="dlq")
app.add_typer(audit_app, name="audit")
app.add_typer(contracts_app, name="contracts")

console = Console()


def _print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, default=str) + "\n")
    sys.stdout.flush()


def _settings() -> Any:
    return load_settings().require_infrastructure()


# --- running -----------------------------------------------------------------------------


@app.command()
def up(
    partitions: Annotated[int, typer.Option(help="partitions of every topic")] = 0,
    fresh: Annotated[bool, typer.Option(help="start from an empty database")] = False,
    demo: Annotated[bool, typer.Option(help="demo tenants, approvers and provider")] = True,
) -> None:
    """Start everything: broker and Postgres (embedded unless configured), topics, all workers."""
    from toolgate.ops.up import up as run_up

    overrides: dict[str, Any] = {"partitions": partitions} if partitions else {}
    # `up` writes the runtime file; it never reads a stale one left by an earlier run.
    run_up(load_settings(use_runtime=False, **overrides), demo=demo, fresh=fresh)


@app.command()
def worker(
    stage: Annotated[
        str,
        typer.Argument(
            help="validation, policy, approval-wait, execution, outbox-relay, normalization or reconciliation"
        ),
    ],
) -> None:
    """Run one stage's worker (what `toolgate up` runs for each stage)."""
    from toolgate.telemetry import configure_logging
    from toolgate.workers.stages import run

    settings = _settings()
    configure_logging(settings.log_level)
    run(stage, settings)


@app.command()
def provider(
    port: Annotated[int, typer.Option()],
    ledger: Annotated[Path, typer.Option(help="SQLite file of the provider's own ledger")],
    token_file: Annotated[Path, typer.Option(help="file holding the bearer token it accepts")],
    host: Annotated[str, typer.Option()] = "127.0.0.1",
) -> None:
    """Run the demo email and payment provider (`toolgate up` starts one for you)."""
    from toolgate.ops.provider import serve

    serve(port, ledger, token_file.read_text().strip(), host)


@app.command()
def setup(
    demo: Annotated[bool, typer.Option(help="demo tenants, agents, approvers and provider token")] = False,
    acls: Annotated[bool, typer.Option("--acls", help="create the Kafka ACL bindings of every principal")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="with --acls: print the bindings, create none")] = False,
    approval_service: Annotated[
        list[str] | None,
        typer.Option(help="an approval service's principal, e.g. User:approvals (=acme,globex to limit its tenants)"),
    ] = None,
    operator: Annotated[list[str] | None, typer.Option(help="an operator's principal")] = None,
) -> None:
    """Prepare a deployment: migrations, topics, the deployment secret (and the demo); with
    --acls, the ACL bindings a real Kafka needs (agents as User:<agent_id>, stages as
    User:toolgate-<stage>)."""
    from toolgate.ops.up import prepare

    settings = _settings()
    prepare(settings, settings.kafka_bootstrap, settings.admin_url, demo, console.print)
    if not acls:
        return
    from toolgate.ops import acls as acl

    plan = acl.plan_from_registry(settings, approval_service or [], operator or ["User:toolgate-operator"])
    bindings = acl.bindings(plan)
    if dry_run:
        sys.stdout.write("\n".join(acl.format_lines(bindings)) + "\n")
        return
    if settings.runtime_file.exists() and "broker" in json.loads(settings.runtime_file.read_text()).get(
        "infrastructure", {}
    ):
        console.print(
            "[red]the embedded broker has no authorizer (and its CreateAcls answer crashes "
            "librdkafka): nothing to apply. Use --dry-run to see the bindings.[/red]"
        )
        raise typer.Exit(1)
    created = acl.apply_to(settings, bindings)
    console.print(f"ACL bindings created: {len(created)}")


@app.command()
def migrate() -> None:
    """Apply pending SQL migrations, as the tables' owner (TOOLGATE_ADMIN_DATABASE_URL, else
    TOOLGATE_DATABASE_URL)."""
    from toolgate.ops.migrate import migrate as run_migrate

    applied = run_migrate(load_settings().admin_url)
    console.print(f"applied: {', '.join(applied) or 'nothing, up to date'}")


@app.command()
def topics(provision_: Annotated[bool, typer.Option("--provision", help="create missing topics")] = False) -> None:
    """Show the topic catalog (and provision it)."""
    from toolgate.topics.catalog import describe, provision

    settings = load_settings()
    if provision_:
        from toolgate.kafka_security import client_config
        from toolgate.ops.agents import registered_tenants

        infra = settings.require_infrastructure()
        created = provision(
            infra.kafka_bootstrap,
            settings.partitions,
            settings.topic_prefix,
            tenants=registered_tenants(infra.database_url),
            client_config=client_config(settings),
        )
        console.print(f"created: {', '.join(created) or 'nothing, all present'}")
    for name, spec in describe(settings.topic_prefix):
        console.print(f"{name:32} {spec.shape:9} key={spec.key:12} {spec.doc}")


@app.command()
def status(
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
    max_lag: Annotated[int | None, typer.Option(help="records a stage may be behind (default 10000)")] = None,
    max_outbox_age: Annotated[
        float | None, typer.Option(help="seconds the oldest unsent outbox row may wait (default 30)")
    ] = None,
) -> None:
    """Health of the running system: each stage's processes, restarts and consumer lag, keys
    PENDING, approvals waiting, open dead letters, the outbox backlog. Exit 1 when unhealthy,
    with the reasons."""
    from toolgate.ops.status import limits_for, render, report

    settings = _settings()
    result = report(settings, limits_for(settings, max_lag=max_lag, max_outbox_age_s=max_outbox_age))
    _print_json(result.as_json()) if as_json else render(result, console)
    if not result.healthy:
        raise typer.Exit(1)


# --- agents --------------------------------------------------------------------------------


def _agent_tenant(agent: str) -> str:
    """The tenant an agent in the local keyring was registered for."""
    from toolgate.agent_keys import AgentKeyring

    try:
        return str(AgentKeyring(_settings().agents_dir).meta(agent)["tenant_id"])
    except KeyError as exc:
        raise SystemExit(f"{exc.args[0]}; or name the tenant with --tenant") from None


@app.command()
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
    from toolgate.topics.client import ToolgateClient

    client = ToolgateClient.from_settings()
    deadline_ms = int((time.time() + deadline_s) * 1000) if deadline_s else None
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
        deadline_ms=deadline_ms,
        dry_run=dry_run,
        watch=wait,
    )
    if not wait:
        if as_json:
            _print_json({"call_id": sent.call_id, "run_id": sent.run_id, "traceparent": sent.traceparent})
        else:
            console.print(f"call_id {sent.call_id}  run_id {sent.run_id}")
        return
    try:
        seen = client.wait(sent, timeout=timeout)
    except TimeoutError as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(2) from exc
    if as_json:
        _print_json({"call_id": sent.call_id, "run_id": sent.run_id, "observation": seen.as_json()})
    else:
        console.print(f"call_id {sent.call_id}  run_id {sent.run_id}")
        console.print_json(data=seen.as_json())


@app.command()
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
    from toolgate.topics.client import ToolgateClient

    client = ToolgateClient.from_settings()
    for seen in client.observations(
        tenant_id=tenant or _agent_tenant(agent),
        run_id=run_id,
        call_ids=[call_id] if call_id else None,
        follow=follow,
    ):
        if as_json:
            _print_json({"run_id": seen.run_id, "call_id": seen.call_id, "observation": seen.as_json()})
        else:
            status = seen.observation.status
            console.print(
                f"{seen.run_id}  {seen.call_id}  {seen.observation.tool_identity.name}  "
                f"{status.taxonomy_class} ({status.code})"
            )


@app.command()
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
    from toolgate.topics.client import ToolgateClient

    settings = _settings()
    sent = run_compensation(settings, call_id, tenant, agent)
    observation = ToolgateClient.from_settings(settings).wait(sent, timeout=timeout).as_json() if wait else None
    if as_json:
        _print_json({"call_id": sent.call_id, "compensation_of": call_id, "observation": observation})
    else:
        console.print(f"compensation call_id {sent.call_id} for {call_id}")
        if observation is not None:
            console.print_json(data=observation)


# --- approvals -----------------------------------------------------------------------------


@approvals_app.command("list")
def approvals_list(
    status: Annotated[str | None, typer.Option(help="PENDING, APPROVED, DENIED or AUTO_DENIED")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Approval tickets, newest first."""
    from toolgate.ops import approvals

    rows = approvals.list_approvals(_settings(), status)
    _print_json(rows) if as_json else approvals.print_list(rows, console)


@approvals_app.command("show")
def approvals_show(approval_id: str, as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """The confirmation card of one held call."""
    from toolgate.ops import approvals

    packet, state = approvals.load(_settings(), approval_id)
    if as_json:
        _print_json({"packet": packet.model_dump(mode="json"), **state})
    else:
        console.print(approvals.card(packet, state))


def _decide(approval_id: str, approver: str, approve: bool, reason: str | None, as_json: bool, wait: float) -> None:
    from rich.markup import escape

    from toolgate.ops import approvals
    from toolgate.signing import PacketMismatch

    settings = _settings()
    try:
        decision = approvals.decide(settings, approval_id, approver, approve, reason)
    except PacketMismatch as exc:
        console.print(f"[red]refused to sign: {escape(str(exc))}[/red]")
        raise typer.Exit(1) from exc
    verb = "approved" if approve else "denied"
    judged = approvals.judgment(settings, decision.decision_id, wait) if wait > 0 else None
    if as_json:
        _print_json(
            {
                "decision_id": decision.decision_id,
                "approval_id": approval_id,
                "approver": approver,
                "verdict": verb,
                "judgment": judged,
            }
        )
    else:
        shown = escape(approvals.shown(approval_id))
        console.print(f"{escape(approver)} {verb} {shown} (decision {decision.decision_id}, signed)")
        if judged is None and wait > 0:
            console.print(f"[yellow]not judged within {wait:g} s; see toolgate approvals show {shown}[/yellow]")
        elif judged is not None and judged["outcome"] == "counted":
            console.print(f"counted: the approval is now {escape(str(judged['status_after']))}")
        elif judged is not None:
            color = "yellow" if judged["outcome"] == "noop" else "red"
            said = escape(approvals.shown(f"{judged['outcome']}: {judged['code']}: {judged['reason']}"))
            console.print(f"[{color}]{said}[/{color}]")
    if judged is not None and judged["outcome"] == "refused":
        raise typer.Exit(1)


WAIT_OPTION = typer.Option("--wait", help="seconds to wait for the judgment of the decision (0: do not wait)")


@approvals_app.command("approve")
def approvals_approve(
    approval_id: str,
    approver: Annotated[str, typer.Option("--as", help="approver id (its key must be in the local keyring)")],
    reason: Annotated[str | None, typer.Option()] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    wait: Annotated[float, WAIT_OPTION] = 15.0,
) -> None:
    """Sign and publish an approval; say whether it counted (exit 1 when it was refused)."""
    _decide(approval_id, approver, True, reason, as_json, wait)


@approvals_app.command("deny")
def approvals_deny(
    approval_id: str,
    approver: Annotated[str, typer.Option("--as", help="approver id")],
    reason: Annotated[str | None, typer.Option()] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    wait: Annotated[float, WAIT_OPTION] = 15.0,
) -> None:
    """Sign and publish a denial: the call ends, nothing runs."""
    _decide(approval_id, approver, False, reason, as_json, wait)


ACTOR_OPTION = typer.Option("--as", help="who makes the change (written to the audit log)")


@approvers_app.command("add")
def approvers_add(
    approver: str,
    risk_classes: Annotated[str, typer.Option(help="comma-separated side-effect classes")] = "HIGH_RISK_EXTERNAL",
    groups: Annotated[str, typer.Option(help="comma-separated approver groups")] = "",
    actor: Annotated[str, ACTOR_OPTION] = "operator",
) -> None:
    """Register a new approver: a new Ed25519 key (private in the local keyring, public in
    Postgres). An approver already registered is refused (`rotate` replaces a key)."""
    from toolgate.ops import approvers

    classes, named = [c for c in risk_classes.split(",") if c], [g for g in groups.split(",") if g]
    path = _registry_call(approvers.add_approver, _settings(), approver, classes, named, actor)
    console.print(f"approver {approver} registered; private key at {path}")


@approvers_app.command("rotate")
def approvers_rotate(approver: str, actor: Annotated[str, ACTOR_OPTION] = "operator") -> None:
    """Give an active approver a new key; decisions signed with the old one stop counting."""
    from toolgate.ops import approvers

    key_id, path = _registry_call(approvers.rotate_approver, _settings(), approver, actor)
    console.print(f"approver {approver} has a new key {key_id}; private key at {path}")


@approvers_app.command("list")
def approvers_list(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    from rich.markup import escape

    from toolgate.ops import approvers

    rows = approvers.list_approvers(_settings())
    if as_json:
        _print_json(rows)
        return
    for r in rows:
        console.print(
            escape(
                f"{r['approver']:12} {r['status']:8} {r['key_id']}  {','.join(r['risk_classes'])}  "
                f"groups={','.join(r['groups'])}"
            )
        )


@approvers_app.command("revoke")
def approvers_revoke(approver: str, actor: Annotated[str, ACTOR_OPTION] = "operator") -> None:
    """Revoke an approver for good: its decisions stop counting at once."""
    from toolgate.ops import approvers

    if not approvers.revoke_approver(_settings(), approver, actor):
        raise SystemExit(f"no active approver {approver}")
    console.print(f"approver {approver} revoked")


# --- tenants and agents ---------------------------------------------------------------------


def _registry_call(fn: Any, *args: Any, **kwargs: Any) -> Any:
    from toolgate.ops.agents import RegistryError

    try:
        return fn(*args, **kwargs)
    except (RegistryError, ValueError) as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(1) from exc


@tenants_app.command("add")
def tenants_add(tenant: str, actor: Annotated[str, typer.Option("--as")] = "operator") -> None:
    """Register a tenant and create its edge topics (observations, confirmation packets)."""
    from toolgate.ops.agents import add_tenant

    created = _registry_call(add_tenant, _settings(), tenant, actor)
    console.print(f"tenant {tenant} registered; topics created: {', '.join(created) or 'none, all present'}")


@tenants_app.command("list")
def tenants_list(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    from toolgate.ops.agents import registered_tenants

    tenants = registered_tenants(_settings().database_url)
    _print_json(tenants) if as_json else console.print("\n".join(tenants) or "no tenants")


SCOPES_OPTION = typer.Option(help="comma-separated scopes granted, e.g. invoices:read,invoices:write")
PUBLIC_KEY_OPTION = typer.Option(
    "--public-key", help="the agent's Ed25519 public key (PEM or hex); its private key never leaves the agent's host"
)


@agents_app.command("add")
def agents_add(
    agent: str,
    tenant: Annotated[str, typer.Option(help="the tenant the agent acts for (registered)")],
    scopes: Annotated[str, SCOPES_OPTION] = "",
    public_key: Annotated[Path | None, PUBLIC_KEY_OPTION] = None,
    actor: Annotated[str, typer.Option("--as")] = "operator",
) -> None:
    """Register an agent: its tenant, its granted scopes and an Ed25519 key (a new pair, the
    private key into the local keyring, or the public key of one kept elsewhere)."""
    from toolgate.ops.agents import add_agent

    key_id, path = _registry_call(
        add_agent, _settings(), agent, tenant, [s for s in scopes.split(",") if s], public_key, actor
    )
    where = f"private key at {path}" if path else "public key registered"
    console.print(f"agent {agent} registered for tenant {tenant}: key {key_id}, {where}")


@agents_app.command("rotate")
def agents_rotate(
    agent: str,
    public_key: Annotated[Path | None, PUBLIC_KEY_OPTION] = None,
    actor: Annotated[str, typer.Option("--as")] = "operator",
) -> None:
    """Add a key to an agent; its other keys stay active until revoked."""
    from toolgate.ops.agents import rotate

    key_id, path = _registry_call(rotate, _settings(), agent, public_key, actor)
    console.print(f"agent {agent}: new key {key_id}" + (f", private key at {path}" if path else ""))


@agents_app.command("revoke")
def agents_revoke(
    agent: str,
    key: Annotated[str | None, typer.Option("--key", help="revoke only this key id")] = None,
    actor: Annotated[str, typer.Option("--as")] = "operator",
) -> None:
    """Revoke an agent (or one of its keys): its proposals are refused from now on."""
    from toolgate.agent_keys import AgentKeyring
    from toolgate.ops.agents import revoke

    settings = _settings()
    count = _registry_call(revoke, settings, agent, key, actor)
    AgentKeyring(settings.agents_dir).forget(agent, key)
    console.print(f"agent {agent}: " + (f"key {key} revoked" if key else f"revoked with its {count} active key(s)"))


@agents_app.command("list")
def agents_list(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    from toolgate.ops.agents import list_agents

    rows = list_agents(_settings())
    if as_json:
        _print_json(rows)
        return
    for r in rows:
        console.print(
            f"{r['agent']:16} {r['tenant']:10} {r['status']:8} keys={','.join(r['active_keys']) or '-'}  "
            f"scopes={','.join(r['scopes'])}"
        )


# --- dead letters --------------------------------------------------------------------------


@dlq_app.command("list")
def dlq_list(
    as_json: Annotated[bool, typer.Option("--json")] = False,
    all_: Annotated[bool, typer.Option("--all", help="include replayed and discarded")] = False,
) -> None:
    """Dead letters on tool.deadletter (open and forged ones unless --all)."""
    from toolgate.ops import dlq

    rows = dlq.listed(_settings(), everything=all_)
    if as_json:
        _print_json(rows)
        return
    for r in rows:
        console.print(
            f"{r['dead_letter_id']}  {r['state']:9} {r['stage']:14} {r['taxonomy_class']:22} "
            f"call={r['call_id']}  {r['reason'][:80]}"
        )
    console.print(f"{len(rows)} dead letter(s)")


@dlq_app.command("show")
def dlq_show(dead_letter_id: str) -> None:
    from toolgate.ops import dlq

    settings = _settings()
    found = dlq.find(settings, dead_letter_id)
    letter = found.letter
    info = dlq.summary(found, dlq.actions(settings).get(dead_letter_id))
    info["headers"] = {h.key: (h.value or b"").decode("utf-8", "replace") for h in letter.headers}
    info["value_prefix_hex"] = letter.value[:64].hex()
    _print_json(info)


@dlq_app.command("replay")
def dlq_replay(dead_letter_id: str, actor: Annotated[str, typer.Option("--as")] = "operator") -> None:
    """Republish the original bytes where they came from (same call, same idempotency key)."""
    from toolgate.ops import dlq

    _print_json(dlq.replay(_settings(), dead_letter_id, actor))


@dlq_app.command("discard")
def dlq_discard(
    dead_letter_id: str,
    note: Annotated[str | None, typer.Option()] = None,
    actor: Annotated[str, typer.Option("--as")] = "operator",
) -> None:
    """Mark a dead letter handled without replaying it."""
    from toolgate.ops import dlq

    dlq.discard(_settings(), dead_letter_id, actor, note)
    console.print(f"discarded {dead_letter_id}")


# --- reconciliation, audit, benchmark ------------------------------------------------------


@app.command()
def reconcile(once: Annotated[bool, typer.Option("--once", help="run one pass and exit")] = True) -> None:
    """Resolve idempotency keys left PENDING by crashes (one pass)."""
    import asyncio

    from toolgate.contracts.registry import load_registry
    from toolgate.workers.reconciliation.reconciler import Reconciler

    settings = _settings()
    reconciler = Reconciler(load_registry(settings.contracts_dir), settings)

    async def one() -> dict[str, int]:
        try:
            return await reconciler.reconcile_once()
        finally:
            await reconciler.http.close()
            await reconciler.pool.close()

    _print_json(asyncio.run(one()))


@app.command()
def redrive() -> None:
    """Re-publish what Postgres holds in flight (pending packets, approved releases, the outbox
    rows of the last hour), for a Kafka that lost its topics while toolgate ran; `toolgate up`
    does it by itself whenever it has to create the topics. Prints what it said again."""
    from toolgate.ops.up import redrive_from_postgres

    settings = _settings()
    _print_json(redrive_from_postgres(settings, settings.admin_url, lambda _: None))


@app.command()
def prune() -> None:
    """Delete the history older than its retention (one pass, as the reconciliation worker runs
    every TOOLGATE_RETENTION_INTERVAL_SECONDS); prints how many rows each table lost."""
    import asyncio

    from toolgate.contracts.policy import load_policy
    from toolgate.contracts.registry import load_registry
    from toolgate.workers.reconciliation.pruner import Pruner

    settings = _settings()
    pruner = Pruner(load_registry(settings.contracts_dir), load_policy(settings.policy_file), settings)

    async def one() -> dict[str, int]:
        try:
            return await pruner.prune_once()
        finally:
            await pruner.close()

    _print_json(asyncio.run(one()))


@audit_app.command("verify")
def audit_verify(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Check the audit log's hash chain end to end, and that nothing was cut from its end since
    its newest signed checkpoint (exit 1 when either fails)."""
    from dataclasses import asdict

    from rich.markup import escape

    from toolgate.ops.audit import describe, verify_log

    report = verify_log(_settings())
    lines = describe(report)
    a, v = report.anchor, report.violated
    if as_json:
        anchor, violated = ({**asdict(c), "signature": c.signature.hex()} if c else None for c in (a, v))
        _print_json(
            {
                "verdict": report.verdict,
                "ok": report.ok,
                "rows": report.rows,
                "anchor": anchor,
                "violated": violated,
                "said": lines,
            }
        )
    else:
        color = "green" if report.ok else "red"
        console.print(f"[{color}]{escape(lines[0])}[/{color}]")
        for line in lines[1:]:
            console.print(f"[yellow]{escape(line)}[/yellow]")
    if not report.ok:
        raise typer.Exit(1)


@app.command()
def bench(
    tool: Annotated[str, typer.Option(help="tool to drive")] = "invoice.create_draft",
    calls: Annotated[int, typer.Option(help="number of proposals")] = 2000,
    rate: Annotated[float, typer.Option(help="offered calls per second; 0 = as fast as possible")] = 0.0,
    agent: Annotated[str, typer.Option(help="the agent that signs (its key in the local keyring)")] = "cli",
    timeout: Annotated[float, typer.Option(help="seconds to wait for the last observation")] = 120.0,
    cpu: Annotated[bool, typer.Option("--cpu", help="also report each local process's CPU per call")] = False,
    postgres_only: Annotated[
        bool, typer.Option("--postgres-only", help="measure only the execution stage's SQL, in a scratch database")
    ] = False,
    connections: Annotated[int, typer.Option(help="with --postgres-only: connections side by side")] = 2,
    batch: Annotated[int, typer.Option(help="with --postgres-only: calls per round")] = 200,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Drive N proposals through the running pipeline; report calls/s and latency percentiles."""
    from toolgate.ops.bench import run_bench

    settings = _settings()
    if postgres_only:
        from toolgate.ops.pgceiling import measure

        _print_json(measure(settings.database_url, batch=batch, connections=connections))
        return
    report = run_bench(
        settings, tool=tool, calls=calls, rate=rate, agent=agent, timeout=timeout, progress=not as_json, cpu=cpu
    )
    if as_json:
        _print_json(report)
    else:
        console.print_json(data=report)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
