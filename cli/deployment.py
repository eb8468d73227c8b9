"""Running and preparing a deployment: `up`, `worker`, `provider`, `setup`, `migrate`, `topics`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from toolgate.cli.common import console, registry_call, running
from toolgate.settings import Settings, load_settings


def up(
    partitions: Annotated[int, typer.Option(help="partitions of every topic")] = 0,
    fresh: Annotated[bool, typer.Option(help="start from an empty database (and an empty Kafka cluster)")] = False,
    demo: Annotated[bool, typer.Option(help="demo tenants, approvers and provider")] = True,
    broker: Annotated[
        str | None,
        typer.Option(help="tansu (embedded, in memory; the default) or kafka (Apache Kafka, data kept in the home)"),
    ] = None,
    brokers: Annotated[int, typer.Option(help="with --broker kafka: how many nodes (3 for replication)")] = 0,
    secure: Annotated[
        bool,
        typer.Option(
            "--secure",
            help="with --broker kafka: SASL_SSL (SCRAM-SHA-512), an authorizer, ACLs applied, a principal per worker",
        ),
    ] = False,
) -> None:
    """Start everything: broker and Postgres (embedded unless configured), topics, all workers."""
    from toolgate.ops.stack.up import up as run_up

    overrides: dict[str, Any] = {"partitions": partitions} if partitions else {}
    if broker is not None:
        overrides["broker"] = broker
    if brokers:
        overrides["brokers"] = brokers
    if secure:
        overrides["kafka_secure"] = True
    # `up` writes the runtime file; it never reads a stale one left by an earlier run.
    run_up(load_settings(use_runtime=False, **overrides), demo=demo, fresh=fresh)


def worker(
    stage: Annotated[
        str,
        typer.Argument(
            help="validation, policy, approval-wait, execution, outbox-relay, normalization or reconciliation"
        ),
    ],
) -> None:
    """Run one stage's worker (what `toolgate up` runs for each stage)."""
    from toolgate.ops.stage import run_stage

    run_stage(stage, running())


def provider(
    port: Annotated[int, typer.Option()],
    ledger: Annotated[Path, typer.Option(help="SQLite file of the provider's own ledger")],
    token_file: Annotated[Path, typer.Option(help="file holding the bearer token it accepts")],
    host: Annotated[str, typer.Option()] = "127.0.0.1",
) -> None:
    """Run the demo email and payment provider (`toolgate up` starts one for you)."""
    from toolgate.ops.stack.provider import serve

    serve(port, ledger, token_file.read_text().strip(), host)


def setup(
    demo: Annotated[bool, typer.Option(help="demo tenants, agents, approvers and provider token")] = False,
    acls: Annotated[bool, typer.Option("--acls", help="create the Kafka ACL bindings of every principal")] = False,
    prune: Annotated[
        bool, typer.Option("--prune", help="with --acls: also delete bindings on toolgate's topics the plan lacks")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="with --acls: print the bindings (and with --prune those it would delete)")
    ] = False,
    approval_service: Annotated[
        list[str] | None,
        typer.Option(
            help="an approval service's principal, e.g. User:approvals (=acme,globex to limit its tenants); "
            "on a home `toolgate up --secure` runs, its own unless given"
        ),
    ] = None,
    operator: Annotated[list[str] | None, typer.Option(help="an operator's principal")] = None,
    door: Annotated[
        list[str] | None,
        typer.Option(help="the MCP door's principal, User:toolgate-mcp unless given (=acme to limit its tenants)"),
    ] = None,
) -> None:
    """Prepare a deployment: migrations, topics, the deployment secret (and the demo); with
    --acls, the ACL bindings a real Kafka needs (agents as User:<agent_id>, stages as
    User:toolgate-<stage>, the MCP door as User:toolgate-mcp), and with --prune it reconciles:
    bindings on toolgate's topics and groups that the plan lacks (a revoked agent's) are deleted."""
    from toolgate.ops import acls as acl
    from toolgate.ops.kafka_credentials import home_approval_services
    from toolgate.ops.stack.prepare import prepare

    settings = running()
    prepare(settings, settings.kafka_bootstrap, settings.admin_url, demo, console.print)
    if acls:
        # On a home `toolgate up --secure` runs, its approval services unless others are named.
        services = approval_service or home_approval_services(settings.home)
        principals = (services, operator or [acl.OPERATOR_PRINCIPAL], door or [acl.DOOR_PRINCIPAL])
        _apply_acls(settings, principals, dry_run, prune)


def _apply_acls(
    settings: Settings, principals: tuple[list[str], list[str], list[str]], dry_run: bool, prune: bool
) -> None:
    from toolgate.ops import acl_cluster, acl_prune
    from toolgate.ops import acls as acl

    bindings = acl.bindings(registry_call(acl_cluster.plan_from_registry, settings, *principals))
    if dry_run and not prune:
        sys.stdout.write("\n".join(acl_cluster.format_lines(bindings)) + "\n")
        return
    if settings.runtime_file.exists() and "broker" in json.loads(settings.runtime_file.read_text()).get(
        "infrastructure", {}
    ):
        console.print(
            "[red]the embedded broker has no authorizer (and its ACL answers crash librdkafka): no "
            "bindings to apply or prune. Use --dry-run without --prune to see the bindings.[/red]"
        )
        raise typer.Exit(1)
    admin = acl_cluster.admin_for(settings)
    if dry_run:
        stale = acl_prune.stale(acl_prune.existing(admin), bindings, settings.topic_prefix)
        lines = acl_cluster.format_lines(bindings) + [f"DELETE {line}" for line in acl_cluster.format_lines(stale)]
        sys.stdout.write("\n".join(lines) + "\n")
        return
    created = acl_cluster.apply(admin, bindings)
    if not prune:
        console.print(f"ACL bindings created: {len(created)}")
        return
    deleted = acl_prune.delete(admin, acl_prune.stale(acl_prune.existing(admin), bindings, settings.topic_prefix))
    console.print(f"ACL bindings created: {len(created)}, deleted: {len(deleted)}")


def migrate() -> None:
    """Apply pending SQL migrations, as the tables' owner (TOOLGATE_ADMIN_DATABASE_URL, else
    TOOLGATE_DATABASE_URL)."""
    from toolgate.ops.migrate import migrate as run_migrate

    applied = run_migrate(load_settings().admin_url)
    console.print(f"applied: {', '.join(applied) or 'nothing, up to date'}")


def topics(provision_: Annotated[bool, typer.Option("--provision", help="create missing topics")] = False) -> None:
    """Show the topic catalog (and provision it)."""
    from toolgate.topics.catalog import describe, provision

    settings = load_settings()
    if provision_:
        from toolgate.kafka_security import ADMIN, client_config
        from toolgate.ops.agents import registered_tenants

        infra = settings.require_infrastructure()
        created = provision(
            infra.kafka_bootstrap,
            settings.partitions,
            settings.topic_prefix,
            tenants=registered_tenants(infra.database_url),
            client_config=client_config(settings, ADMIN),
        )
        console.print(f"created: {', '.join(created) or 'nothing, all present'}")
    for name, spec in describe(settings.topic_prefix):
        console.print(f"{name:32} {spec.shape:9} key={spec.key:12} {spec.doc}")
