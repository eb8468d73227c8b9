"""`toolgate policy`: check a Cedar policy set against the deployed contracts; convert a JSON policy;
deploy a set to the running workers (cli/policy_live.py).

Offline commands: they read the shipped contracts plus `TOOLGATE_CONTRACTS_DIR` (or the runtime
file's contracts_dir) and need no broker or database.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from toolgate.cli.common import console, deployed_contracts, fail
from toolgate.cli.policy_live import live_commands

policy_app = typer.Typer(
    no_args_is_help=True,
    help="Cedar policy sets: check one against the deployed contracts, convert a JSON policy document; deploy one "
    "(or a shadow) to the running workers.",
)
live_commands(policy_app)  # deploy, deployed, shadow (cli/policy_live.py)


@policy_app.command("check")
def check_policy(directory: Annotated[Path, typer.Argument(help="a directory of *.cedar files")]) -> None:
    """Would the policy workers admit this set (its policies and budgets.json)? Every problem named;
    exit 1 when it is refused."""
    from toolgate.contracts.admission import ContractRefused
    from toolgate.contracts.policy_set import load_policy_set

    if not directory.is_dir():
        raise fail(f"{directory}: not a directory")
    contracts = deployed_contracts()
    try:
        admitted = load_policy_set(contracts, directory)
    except ContractRefused as exc:
        raise fail(str(exc), code=1) from exc
    versions = sum(1 for _ in contracts)
    console.print(
        f"[green]ok[/green] {len(admitted.cedar.rules)} policies and their budgets admitted against {versions} "
        f"contract versions (contracts {contracts.digest}); policy set {admitted.digest}",
        soft_wrap=True,
    )


@policy_app.command("convert")
def convert_policy(
    source: Annotated[Path, typer.Argument(help="a JSON policy document (rules and budgets, the format before Cedar)")],
    directory: Annotated[Path, typer.Argument(help="where to write rules.cedar and budgets.json")],
    force: Annotated[bool, typer.Option("--force", help="overwrite files of the same names")] = False,
) -> None:
    """Write a JSON policy's rules as a Cedar set that decides as they did, and its budgets apart."""
    from toolgate.contracts.admission import ContractRefused
    from toolgate.contracts.cedar_policy import PolicyRefused, admit_policies
    from toolgate.contracts.policy_convert import RULES_FILE, admit_json_policy, convert

    try:
        document = admit_json_policy(json.loads(source.read_text()), str(source))
    except (OSError, ValueError, ContractRefused) as exc:
        raise fail(f"{source}: {exc}") from exc
    files = convert(document, source.name)
    try:  # the set as written must be one the workers admit
        admit_policies([(RULES_FILE, files[RULES_FILE])], deployed_contracts())
    except PolicyRefused as exc:
        raise fail(f"{source}: its rules convert to a set that is refused: {exc}", code=1) from exc
    existing = [name for name in files if (directory / name).exists()]
    if existing and not force:
        raise fail(f"{directory}: has {', '.join(existing)} already; --force overwrites")
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (directory / name).write_text(text)
        console.print(f"wrote {escape(str(directory / name))}", soft_wrap=True)
