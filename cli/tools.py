"""`toolgate tools quarantine|release|quarantined`: tool versions held from running until an
operator has looked (ops/quarantine.py)."""

from __future__ import annotations

from typing import Annotated

import typer

from toolgate.cli.common import console, literal, print_rows, registry_call, running

tools_app = typer.Typer(
    no_args_is_help=True,
    help="Tool versions in quarantine: none of their calls runs until an operator releases them.",
)


@tools_app.command("quarantine")
def tools_quarantine(
    tool: Annotated[str, typer.Argument(help="TOOL@VERSION, e.g. invoice.fetch@1.0.0")],
    reason: Annotated[str, typer.Option("--reason", help="why: the audit log and `tools quarantined` say it")],
    actor: Annotated[str, typer.Option("--as")] = "operator",
) -> None:
    """Quarantine a tool version: policy refuses every call of it (POLICY_VIOLATION
    tool_quarantined) until `toolgate tools release`. Audited."""
    from toolgate.ops.quarantine import hold

    if registry_call(hold, running(), tool, reason, actor):
        console.print(f"{tool} quarantined")
    else:
        console.print(f"{tool} was already quarantined; it keeps its first reason")


@tools_app.command("release")
def tools_release(
    tool: Annotated[str, typer.Argument(help="TOOL@VERSION")],
    actor: Annotated[str, typer.Option("--as")] = "operator",
) -> None:
    """Release a quarantined tool version: its calls run again. Audited."""
    from toolgate.ops.quarantine import release

    released = registry_call(release, running(), tool, actor)
    console.print(literal(f"{tool} released (it was quarantined by {released.actor}: {released.reason})"))


@tools_app.command("quarantined")
def tools_quarantined(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """The quarantined tool versions: why, by whom, since when, and the call that tripped the detector."""
    from toolgate.ops.quarantine import held

    rows = [
        {
            "tool": q.tool_name,
            "version": q.tool_version,
            "reason": q.reason,
            "by": q.actor,
            "call_id": q.call_id,
            "tenant": q.tenant_id,
            "since": str(q.since),
        }
        for q in held(running())
    ]
    print_rows(
        rows,
        as_json,
        lambda r: f"{r['tool']}@{r['version']}  since {r['since']}  by {r['by']}: {r['reason']}",
        empty="no tool version is quarantined",
    )
