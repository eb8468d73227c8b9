"""The hash-chained audit log: `audit verify`."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from toolgate.cli.common import console, print_json, running

audit_app = typer.Typer(no_args_is_help=True, help="The hash-chained audit log.")


@audit_app.command("verify")
def audit_verify(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Check the audit log's hash chain end to end, and that nothing was cut from its end since
    its newest signed checkpoint (exit 1 when either fails)."""
    from toolgate.ops.audit import checkpoint_json, describe, verify_log

    report = verify_log(running())
    lines = describe(report)
    if as_json:
        print_json(
            {
                "verdict": report.verdict,
                "ok": report.ok,
                "rows": report.rows,
                "anchor": checkpoint_json(report.anchor),
                "violated": checkpoint_json(report.violated),
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
