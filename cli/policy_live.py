"""`toolgate policy deploy|deployed` and `toolgate policy shadow report|stop`: policy sets deployed
while everything runs (ops/policy_deploy.py; the workers' side: workers/policy/live.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from toolgate.cli.common import console, fail, print_json, print_rows, registry_call, running


def live_commands(policy_app: typer.Typer) -> None:
    """Add the commands of deployed sets to `toolgate policy`."""
    policy_app.command("deploy")(deploy_policy)
    policy_app.command("deployed")(deployed_policy)
    shadow_app = typer.Typer(no_args_is_help=True, help="The shadow policy set: what it would decide otherwise.")
    shadow_app.command("report")(shadow_report)
    shadow_app.command("stop")(shadow_stop)
    policy_app.add_typer(shadow_app, name="shadow")


def deploy_policy(
    directory: Annotated[Path, typer.Argument(help="a directory of *.cedar files and budgets.json")],
    shadow: Annotated[bool, typer.Option("--shadow", help="judge it beside the enforcing set; change nothing")] = False,
    actor: Annotated[str, typer.Option("--as")] = "operator",
) -> None:
    """Admit the set against the deployed contracts, sign it with the deployment's key, store it
    (audited): every policy worker takes it at its next round. A refused set is stored nowhere
    (every problem named; exit 1)."""
    from toolgate.contracts.admission import ContractRefused
    from toolgate.ops.policy_deploy import deploy

    if not directory.is_dir():
        raise fail(f"{directory}: not a directory")
    settings = running()
    try:
        done = registry_call(deploy, settings, directory, shadow, actor)
    except ContractRefused as exc:
        raise fail(f"not deployed: {exc}", code=1) from exc
    console.print(
        f"[green]deployed[/green] policy set {done.digest} as the {done.role} set (deployment {done.deployment_id}, "
        f"{done.policies} policies, signed by {done.key_id}; before: {done.previous or 'none deployed'})",
        soft_wrap=True,
    )


def deployed_policy(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """The enforcing and shadow sets deployed now, and the latest deployments. (Until a set is
    deployed, each policy worker enforces its TOOLGATE_POLICY_DIR's.)"""
    from toolgate.ops.policy_deploy import deployed

    current, history = deployed(running())
    rows = [
        {
            "deployment": d.id,
            "role": d.role,
            "digest": d.digest,
            "by": d.deployed_by,
            "key_id": d.key_id,
            "at": str(d.deployed_at),
            "current": current.get(d.role) is not None and current[d.role].id == d.id,
        }
        for d in history
    ]
    if as_json:
        print_json({role: (d.digest if d else None) for role, d in current.items()} | {"history": rows})
        return
    for role in ("enforcing", "shadow"):
        found = current.get(role)
        shown = found.digest if found and found.digest else "none deployed"
        if role == "enforcing" and not found:
            shown += " (each policy worker enforces its TOOLGATE_POLICY_DIR's set)"
        console.print(f"{role}: {escape(shown)}", soft_wrap=True)
    for row in rows:
        mark = "*" if row["current"] else " "
        console.print(
            f"{mark} {row['deployment']} {row['role']} {row['digest'] or '(stopped)'} by {escape(str(row['by']))} "
            f"at {row['at']}",
            soft_wrap=True,
        )


def shadow_report(
    since: Annotated[str, typer.Option("--since", help="how far back: 24h, 30m, 7d")] = "24h",
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """The calls a shadow set decided otherwise than the enforcing set, by tool and each side's
    class and code, with example call ids."""
    from toolgate.ops.policy_deploy import duration_s, shadow_report

    settings = running()
    found = registry_call(shadow_report, settings, registry_call(duration_s, since))
    rows: list[dict[str, Any]] = [
        {
            "tool": r.tool_name,
            "enforcing": f"{r.enforcing[0]} {r.enforcing[1]}".strip(),
            "shadow": f"{r.shadow[0]} {r.shadow[1]}".strip(),
            "shadow_set": r.shadow_digest,
            "count": r.count,
            "examples": r.examples,
        }
        for r in found
    ]
    print_rows(
        rows,
        as_json,
        lambda row: (
            f"{row['tool']}: {row['count']} x enforcing {row['enforcing']} -> shadow {row['shadow']} "
            f"(set {row['shadow_set']}); e.g. {', '.join(map(str, row['examples']))}"
        ),
        empty=f"no disagreements in the last {escape(since)}",
    )


def shadow_stop(actor: Annotated[str, typer.Option("--as")] = "operator") -> None:
    """End the shadow set (audited): the workers judge no candidate from their next round."""
    from toolgate.ops.policy_deploy import stop_shadow

    done = registry_call(stop_shadow, running(), actor)
    console.print(f"shadow policy set {done.previous} stopped (deployment {done.deployment_id})", soft_wrap=True)
