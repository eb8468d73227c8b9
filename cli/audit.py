"""The hash-chained audit log: `audit verify`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from toolgate.cli.common import console, print_json, running

audit_app = typer.Typer(no_args_is_help=True, help="The hash-chained audit log.")


@audit_app.command("verify")
def audit_verify(
    as_json: Annotated[bool, typer.Option("--json")] = False,
    witness_checkpoint: Annotated[
        Path | None,
        typer.Option(
            "--witness-checkpoint",
            help="a checkpoint a witness cosigned: its state's <id>.checkpoint, or its state directory",
        ),
    ] = None,
) -> None:
    """Check the audit log's hash chain end to end, that nothing was cut from its end since its
    newest signed checkpoint, and its Merkle tree heads and their witnesses' cosignatures; with
    --witness-checkpoint, the log against a checkpoint a witness cosigned (exit 1 when any fails)."""
    from toolgate.ops.audit import checkpoint_json, describe, verify_log
    from toolgate.ops.audit_tree import describe_tree, verify_tree

    settings = running()
    report = verify_log(settings)
    tree = verify_tree(settings, witness_checkpoint)
    lines, tree_lines = describe(report), describe_tree(tree)
    ok = report.ok and tree.ok
    if as_json:
        print_json(
            {
                "verdict": report.verdict,
                "ok": ok,
                "rows": report.rows,
                "anchor": checkpoint_json(report.anchor),
                "violated": checkpoint_json(report.violated),
                "tree": {"ok": tree.ok, "heads": tree.heads, "cosigned": tree.cosigned, "rewritten": tree.rewritten},
                "said": lines + tree_lines,
            }
        )
    else:
        color = "green" if report.ok else "red"
        console.print(f"[{color}]{escape(lines[0])}[/{color}]")
        for line in lines[1:]:
            console.print(f"[yellow]{escape(line)}[/yellow]")
        color = "green" if tree.ok else "red"
        console.print(f"[{color}]{escape(tree_lines[0])}[/{color}]")
        for line in tree_lines[1:]:
            console.print(f"[{'yellow' if tree.ok else 'red'}]{escape(line)}[/]")
    if not ok:
        raise typer.Exit(1)
