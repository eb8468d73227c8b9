"""`toolgate evidence`: a call's evidence bundle (docs/evidence.md). `evidence CALL_ID` prints it;
`evidence export --since TIME --out DIR` writes one file per call made since then, live or
archived. A first argument that names no subcommand is a call id (`evidence show CALL_ID`)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from typer._click.core import Context
from typer.core import TyperGroup

from toolgate.cli.common import console, fail, print_json, running
from toolgate.cli.evidence_verify import evidence_verify

notes = Console(stderr=True)  # what `evidence CALL_ID > bundle.json` says beside the bundle


class CallOrCommand(TyperGroup):
    """`evidence CALL_ID` as `evidence show CALL_ID`: a call id is not a subcommand's name."""

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        if args and not args[0].startswith("-") and args[0] not in self.commands:
            args = ["show", *args]
        return super().parse_args(ctx, args)


evidence_app = typer.Typer(
    cls=CallOrCommand,
    no_args_is_help=True,
    help="A call's evidence bundle, checkable offline: `toolgate evidence CALL_ID > bundle.json`; "
    "`evidence export --since TIME --out DIR` for an archive (docs/evidence.md).",
)


@evidence_app.command("show", hidden=True)
def show(
    call_id: Annotated[str, typer.Argument(help="the call's call_id")],
    tenant: Annotated[str | None, typer.Option("--tenant", help="the call's tenant (default: its only one)")] = None,
    wait: Annotated[
        float, typer.Option("--wait", help="seconds to wait at most for a signed tree head covering its audit rows")
    ] = 0.0,
) -> None:
    """Print the call's evidence bundle (one JSON document)."""
    from toolgate.ops.evidence import NoEvidence, bundle

    try:
        found = bundle(running(), call_id, tenant, wait)
    except NoEvidence as exc:
        raise fail(str(exc), code=1) from exc
    print_json(found)
    uncovered = found["audit"]["uncovered"]
    if uncovered:
        notes.print(
            f"{uncovered} audit row(s) newer than the newest signed tree head: no inclusion proof yet "
            "(--wait SECONDS waits for the next head)",
            style="yellow",
        )


def _time(text: str) -> datetime:
    at = datetime.fromisoformat(text)
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


@evidence_app.command("export")
def export(
    since: Annotated[str, typer.Option("--since", help="calls made since (ISO 8601; UTC if no offset)")],
    out: Annotated[Path, typer.Option("--out", help="directory to write one <tenant>.<call_id>.json per call into")],
    tenant: Annotated[str | None, typer.Option("--tenant", help="only this tenant's calls")] = None,
) -> None:
    """Write the evidence bundle of every call made since TIME, live or archived, one file each."""
    from toolgate.ops.evidence import export as export_bundles

    try:
        at = _time(since)
    except ValueError as exc:
        raise fail(f"--since: not an ISO 8601 time: {since}") from exc
    written = export_bundles(running(), at, out, tenant)
    console.print(f"{written} bundle(s) written to {out}")


evidence_app.command("verify")(evidence_verify)
