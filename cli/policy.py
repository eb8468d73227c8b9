"""`toolgate policy`: check a Cedar policy set against the deployed contracts, show one, diff two
(contracts/policy_view.py); convert a JSON policy; `decided CALL_ID`: the recorded decisions on a
call (ops/call_records.py); deploy a set, or a shadow, to the running workers (cli/policy_live.py).

Offline commands but `decided` and the live ones: they read the shipped contracts plus `TOOLGATE_CONTRACTS_DIR` (or
the runtime file's contracts_dir) and need no broker or database.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from toolgate.cli.common import console, deployed_contracts, fail, literal, print_json, running
from toolgate.cli.policy_live import live_commands

if TYPE_CHECKING:
    from toolgate.contracts.policy_view import SetView

policy_app = typer.Typer(
    no_args_is_help=True,
    help="Cedar policy sets: check, show and diff them, convert a JSON policy document; which set decided a call; "
    "deploy one (or a shadow) to the running workers.",
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


def _view(directory: Path | None) -> SetView:
    """The set in `directory` (the configured one: TOOLGATE_POLICY_DIR, or the shipped) as admitted
    against the deployed contracts; exits 1 naming every problem when it is refused."""
    from toolgate.contracts.admission import ContractRefused
    from toolgate.contracts.cedar_policy import policy_files
    from toolgate.contracts.policy_set import load_policy_set
    from toolgate.contracts.policy_view import view

    if directory is not None and not directory.is_dir():
        raise fail(f"{directory}: not a directory")
    try:
        return view(load_policy_set(deployed_contracts(), directory), policy_files(directory))
    except ContractRefused as exc:
        raise fail(str(exc), code=1) from exc


@policy_app.command("show")
def show_policy(
    directory: Annotated[Path | None, typer.Argument(help="a set's directory (default: the configured set)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
) -> None:
    """The set: its digest, each policy by @id (effect, approvals, groups, message, file), its budgets."""
    from toolgate.settings import load_settings

    shown = _view(directory if directory is not None else load_settings().policy_dir)
    if as_json:
        print_json(shown.as_json())
        return
    console.print(f"policy set {shown.digest}", soft_wrap=True)
    for p in shown.policies:
        extra = f" approvals {p.approvals}" if p.approvals else ""
        extra += f" groups {','.join(p.groups)}" if p.groups else ""
        extra += f" message {p.message!r}" if p.message else ""
        console.print(literal(f"  {p.effect:7} {p.id}{extra}  ({p.source})"), soft_wrap=True)
    console.print(literal("budgets: " + json.dumps(dict(shown.budgets), sort_keys=True)), soft_wrap=True)


@policy_app.command("diff")
def diff_policy(
    before: Annotated[Path, typer.Argument(help="a set's directory")],
    after: Annotated[Path, typer.Argument(help="another set's directory")],
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
) -> None:
    """What differs from one set to the other: policies added, removed, changed by @id, budgets; both
    digests. Exit 0 when they are the same, 1 when they differ."""
    from toolgate.contracts.policy_view import diff

    found = diff(_view(before), _view(after))
    if as_json:
        print_json(found.as_json())
    else:
        console.print(f"{found.before} -> {found.after}", soft_wrap=True)
        for name in found.added:
            console.print(literal(f"  added    {name}"), soft_wrap=True)
        for name in found.removed:
            console.print(literal(f"  removed  {name}"), soft_wrap=True)
        for name, what in found.changed:
            console.print(literal(f"  changed  {name}: {'; '.join(what)}"), soft_wrap=True)
        for line in found.budgets:
            console.print(literal(f"  budget   {line}"), soft_wrap=True)
        same = "the same" if found.before == found.after else "the same policies and budgets (files differ otherwise)"
        console.print(same if found.same else "they differ")
    raise typer.Exit(0 if found.same else 1)


@policy_app.command("decided")
def decided_call(
    call_id: Annotated[str, typer.Argument(help="the call's call_id")],
    tenant: Annotated[str | None, typer.Option("--tenant", help="the call's tenant (default: any)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object per decision, in a list")] = False,
) -> None:
    """Which contracts and policy set decided a call, how, and on what: arguments, facts, usage."""
    from dataclasses import asdict

    from toolgate.ops.call_records import decided

    rows = decided(running(), call_id, tenant)
    if as_json:
        print_json([asdict(r) for r in rows])
        return
    if not rows:
        raise fail(f"no recorded decision on {call_id} (unknown, or past retention)", code=1)
    for r in rows:
        outcome = r.outcome + (f" {r.taxonomy_class} {r.code}" if r.outcome == "refuse" else "")
        outcome += f" rule {r.rule}" if r.rule else ""
        outcome += f" approvals {r.approvals}" if r.approvals is not None else ""
        outcome += f" groups {','.join(r.approver_groups)}" if r.approver_groups else ""
        console.print(literal(f"{r.stage} {r.tool_name}@{r.tool_version} (tenant {r.tenant_id}): {outcome}"))
        console.print(f"  contracts {r.contracts_digest or '-'}  policy set {r.policy_digest or '-'}", soft_wrap=True)
        for name, value in (("arguments", (r.call or {}).get("arguments")), ("facts", r.facts), ("usage", r.usage)):
            if value is not None:
                console.print(literal(f"  {name}: {json.dumps(value, sort_keys=True)}"), soft_wrap=True)
