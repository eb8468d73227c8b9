"""`toolgate contracts`: list the registered contracts, check version bumps, export tool definitions.

Offline commands: they read the shipped contracts plus `TOOLGATE_CONTRACTS_DIR` (or the runtime
file's contracts_dir) and need no broker or database.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from toolgate.cli.common import console, deployed_contracts, fail

if TYPE_CHECKING:  # the contracts' modules load when a contracts command runs, not with every command
    from toolgate.contracts.compat import Report
    from toolgate.contracts.registry import Registry

contracts_app = typer.Typer(
    no_args_is_help=True,
    help="Tool contracts: list the registered versions, check version bumps, export model-facing definitions.",
)


def _print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2) + "\n")
    sys.stdout.flush()


@contracts_app.command("list")
def list_contracts(as_json: Annotated[bool, typer.Option("--json", help="print one JSON array")] = False) -> None:
    """Every registered tool version: lifecycle, side-effect class, timeout class, approvals required, owner."""
    contracts = sorted(deployed_contracts(), key=lambda c: (c.name, c.version_tuple))
    rows = [
        {
            "name": c.name,
            "version": c.version,
            "lifecycle": c.lifecycle,
            "side_effect_class": c.side_effect_class,
            "timeout_class": c.binding["timeout_class"],
            "timeout_ms": c.timeout_ms,
            "required_approvals": c.required_approvals,
            "owner": c.owner,
            "sunset_date": c.sunset_date.isoformat() if c.sunset_date else None,
            "source": c.source,
        }
        for c in contracts
    ]
    if as_json:
        _print_json(rows)
        return
    from rich.text import Text

    from toolgate.ops.tables import id_column, print_table, text_column

    table = Table(title="contracts")
    id_column(table, "tool", (c.name for c in contracts))
    id_column(table, "version", (c.version for c in contracts))
    for column in ("lifecycle", "side-effect class", "timeout class", "approvals", "owner"):
        text_column(table, column)
    lines = []
    for c in contracts:
        color = {"deprecated": "yellow", "sunsetted": "red"}.get(c.lifecycle, "green")
        cells = (
            c.side_effect_class,
            f"{c.binding['timeout_class']} ({c.timeout_ms} ms)",
            str(c.required_approvals),
            c.owner,
        )
        table.add_row(c.name, c.version, f"[{color}]{c.lifecycle}[/{color}]", *cells)
        lines.append(Text("  ".join((c.name, c.version, c.lifecycle, *cells))))
    print_table(console, table, lines)


def _document(reference: str, registry: Registry | None) -> dict[str, Any]:
    """A contract document from a file path or a `name@version` reference (exact, MAJOR.x, latest)."""
    from toolgate.contracts.admission import ContractRefused, admit
    from toolgate.contracts.compat import document
    from toolgate.contracts.contract import VERSION
    from toolgate.contracts.registry import Resolution

    path = Path(reference)
    if path.is_file():
        try:
            loaded = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise fail(f"{path}: not JSON: {exc}") from exc
        try:
            return document(admit(loaded, str(path)))
        except ContractRefused as exc:
            raise fail(str(exc)) from exc
    name, at, spec = reference.rpartition("@")
    if not at or not name or registry is None:
        raise fail(f"{reference}: neither a contract file nor a name@version reference")
    try:
        contract = registry.get(name, spec) if VERSION.match(spec) else registry.resolve(name, spec)
    except KeyError as exc:
        raise fail(f"{reference}: no such registered contract") from exc
    except Resolution as exc:
        raise fail(f"{reference}: {exc}") from exc
    return document(contract)


def _print_report(report: Report) -> None:
    color = "green" if report.ok else "red"
    console.print(f"[{color}]{'ok' if report.ok else 'FAIL'}[/{color}] {escape(report.message)}", soft_wrap=True)
    for finding in report.findings:
        severity = "[red]breaking[/red]  " if finding.severity == "breaking" else "[cyan]compatible[/cyan]"
        line = f"  {severity} {escape(finding.rule)}  {escape(finding.path)}: {escape(finding.message)}"
        console.print(line, soft_wrap=True)


@contracts_app.command("check")
def check_contracts(
    old: Annotated[str | None, typer.Argument(help="old version: a contract file or name@version")] = None,
    new: Annotated[str | None, typer.Argument(help="new version: a contract file or name@version")] = None,
    check_all: Annotated[
        bool, typer.Option("--all", help="every pair of consecutive versions of every registered tool")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the reports as JSON")] = False,
) -> None:
    """Is the new version's number right for what changed? Exit 1 when it is not."""
    from toolgate.contracts.compat import check, check_registry

    if check_all:
        if old is not None or new is not None:
            raise fail("give either OLD and NEW or --all, not both")
        reports = check_registry(deployed_contracts())
    elif old is None or new is None:
        raise fail("give OLD and NEW (contract files or name@version), or --all")
    else:
        registry = None if Path(old).is_file() and Path(new).is_file() else deployed_contracts()
        reports = [check(_document(old, registry), _document(new, registry))]
    if as_json:
        _print_json([r.to_dict() for r in reports] if check_all else reports[0].to_dict())
    else:
        for report in reports:
            _print_report(report)
        if check_all:
            failed = sum(not r.ok for r in reports)
            console.print(f"{len(reports)} version pair(s) checked, {failed} failed")
    if not all(r.ok for r in reports):
        raise typer.Exit(1)


@contracts_app.command("export")
def export_contracts(
    include_deprecated: Annotated[
        bool, typer.Option("--include-deprecated", help="also the deprecated versions (never sunsetted ones)")
    ] = False,
    out: Annotated[Path | None, typer.Option("--out", help="write the JSON to this file instead of stdout")] = None,
) -> None:
    """Model-facing tool definitions (advisory: enforcement uses the system-facing contracts)."""
    from toolgate.contracts.export import export_document

    exported = export_document(deployed_contracts(), include_deprecated)
    if out is None:
        _print_json(exported)
        return
    out.write_text(json.dumps(exported, indent=2) + "\n")
    console.print(f"wrote {len(exported['tools'])} tool definition(s) to {escape(str(out))}", soft_wrap=True)
