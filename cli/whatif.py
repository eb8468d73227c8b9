"""`toolgate whatif --policy DIR`: what a candidate policy set (and contracts) would have decided of
the recorded calls (ops/whatif.py, ops/call_records.py). Reads Postgres only; runs and publishes
nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from toolgate.cli.common import console, fail, literal, print_json, running


def whatif(
    policy: Annotated[Path, typer.Option("--policy", help="the candidate policy set's directory")],
    contracts: Annotated[
        Path | None,
        typer.Option("--contracts", help="candidate contracts (with the shipped ones): arguments validated again"),
    ] = None,
    since: Annotated[str, typer.Option("--since", help="how far back: 24h, 30m, 7d")] = "24h",
    tenant: Annotated[str | None, typer.Option("--tenant", help="one tenant's calls only")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
) -> None:
    """Replay the recorded decisions under a candidate policy set: per tool and taxonomy class, which
    outcomes would change, with example calls, and what the replay had to assume."""
    from toolgate.contracts.admission import ContractRefused
    from toolgate.ops.call_records import what_if
    from toolgate.ops.whatif import duration_s

    try:
        window = duration_s(since)
    except ValueError as exc:
        raise fail(str(exc)) from exc
    for directory in (policy, contracts):
        if directory is not None and not directory.is_dir():
            raise fail(f"{directory}: not a directory")
    try:
        report = what_if(running(), policy, contracts, window, tenant).as_json()
    except ContractRefused as exc:
        raise fail(f"candidate refused: {exc}", code=1) from exc
    if as_json:
        print_json(report)
        return
    console.print(f"candidate {report['candidate']}; recorded sets {report['recorded_sets']}", soft_wrap=True)
    console.print(f"{report['replayed']} calls replayed: {report['unchanged']} unchanged, {report['changed']} changed")
    for change in report["changes"]:
        console.print(literal(f"  {change['tool']}  {change['kind']}  {change['taxonomy_class']}: {change['count']}"))
        for example in change["examples"]:
            console.print(
                literal(f"    {example['call_id']} ({example['tenant']}): {example['was']} -> {example['would be']}")
            )
    console.print("assumed:")
    for line in report["assumed"]:
        console.print(literal(f"  {line}"), soft_wrap=True)
