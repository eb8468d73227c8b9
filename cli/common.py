"""What every command group shares: the console, one-line JSON output, the settings of the
running deployment, and an operator's refused request said plainly."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from toolgate.settings import Settings, load_settings

if TYPE_CHECKING:  # the contracts load when a command needs them, not with every command
    from toolgate.contracts.registry import Registry

console = Console()

P = ParamSpec("P")
T = TypeVar("T")


def print_json(value: Any) -> None:
    """One JSON document on one line of stdout (rows and reports hold raw wire values)."""
    sys.stdout.write(json.dumps(value, default=str) + "\n")
    sys.stdout.flush()


def literal(line: str) -> Text:
    """A line holding text a record or an agent chose, as the console must print it: as it is,
    never read as markup (`[/]` would crash it, `[conceal]` hide what follows), every control,
    format and line-break character shown as its escape (so it cannot add or hide lines)."""
    from toolgate.ops.approval_card import shown

    return Text(shown(line))


def print_rows(
    rows: list[dict[str, Any]], as_json: bool, line: Callable[[dict[str, Any]], str], empty: str = ""
) -> None:
    """A listing: its rows as one JSON array (`--json`), or a line each, as literal text never
    broken by the console (an id is copied whole), and `empty` when there are none."""
    if as_json:
        print_json(rows)
        return
    for row in rows:
        console.print(literal(line(row)), soft_wrap=True)
    if not rows and empty:
        console.print(empty)


def running() -> Settings:
    """The settings of a deployment that has a broker and a database (exits when it has not)."""
    return load_settings().require_infrastructure()


def deployed_contracts() -> Registry:
    """The deployed contracts (the shipped ones and TOOLGATE_CONTRACTS_DIR's); exits 2 on one refused."""
    from toolgate.contracts.admission import ContractRefused
    from toolgate.contracts.registry import load_registry

    try:
        return load_registry(load_settings().contracts_dir)
    except ContractRefused as exc:  # what is wrong, not where in toolgate it was found
        raise fail(f"contract refused: {exc}") from exc


def fail(message: str, code: int = 2) -> typer.Exit:
    """Say what is wrong in red; the exit to raise (2: a usage problem, unless told otherwise)."""
    console.print(f"[red]{escape(message)}[/red]", soft_wrap=True)
    return typer.Exit(code)


def registry_call(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Call an operator's registry function; a request it refuses exits 1 with the reason."""
    from toolgate.ops.registry import RegistryError

    try:
        return fn(*args, **kwargs)
    except (RegistryError, ValueError) as exc:
        console.print(f"[red]{escape(str(exc))}[/red]")
        raise typer.Exit(1) from exc
