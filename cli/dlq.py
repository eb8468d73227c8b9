"""The dead letters: `dlq list|show|replay|discard`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

import typer

from toolgate.cli.common import console, literal, print_json, print_rows, running

dlq_app = typer.Typer(no_args_is_help=True, help="The dead-letter topic: list, show, replay, discard.")


@contextmanager
def to_its_end() -> Iterator[None]:
    """A topic the broker did not let be read to its end is said in a line (exit 1), not shown
    as a traceback: every dlq command reads the whole topic."""
    from toolgate.ops.dlq import DeadLettersUnread

    try:
        yield
    except DeadLettersUnread as exc:
        raise SystemExit(f"toolgate dlq: {exc}") from None


@dlq_app.command("list")
def dlq_list(
    as_json: Annotated[bool, typer.Option("--json")] = False,
    all_: Annotated[bool, typer.Option("--all", help="include replayed and discarded")] = False,
) -> None:
    """Dead letters on tool.deadletter (open and forged ones unless --all)."""
    from toolgate.ops import dlq

    with to_its_end():
        rows = dlq.listed(running(), everything=all_)
    print_rows(  # every field is whatever a producer wrote: a forged letter says anything
        rows,
        as_json,
        lambda r: (
            f"{r['dead_letter_id']}  {r['state']:9} {r['stage']:14} {r['taxonomy_class']:22} "
            f"call={r['call_id']}  {str(r['reason'])[:80]}"
        ),
    )
    if not as_json:
        console.print(f"{len(rows)} dead letter(s)")


@dlq_app.command("show")
def dlq_show(dead_letter_id: str) -> None:
    from toolgate.ops import dlq

    settings = running()
    with to_its_end():
        found = dlq.find(settings, dead_letter_id)
    letter = found.letter
    info = dlq.summary(found, dlq.actions(settings).get(dead_letter_id))
    info["headers"] = {h.key: (h.value or b"").decode("utf-8", "replace") for h in letter.headers}
    info["value_prefix_hex"] = letter.value[:64].hex()
    print_json(info)


@dlq_app.command("replay")
def dlq_replay(
    dead_letter_id: str,
    actor: Annotated[str, typer.Option("--as")] = "operator",
    allow_stale: Annotated[
        bool,
        typer.Option(
            "--allow-stale",
            help="send on a record older than the freshness bound (TOOLGATE_RECORD_MAX_AGE_SECONDS), stamped anew; "
            "its original age is kept and audited",
        ),
    ] = False,
) -> None:
    """Republish the original bytes where they came from (same call, same idempotency key)."""
    from toolgate.ops import dlq

    with to_its_end():
        print_json(dlq.replay(running(), dead_letter_id, actor, allow_stale))


@dlq_app.command("discard")
def dlq_discard(
    dead_letter_id: str,
    note: Annotated[str | None, typer.Option()] = None,
    actor: Annotated[str, typer.Option("--as")] = "operator",
) -> None:
    """Mark a dead letter handled without replaying it."""
    from toolgate.ops import dlq

    with to_its_end():
        dlq.discard(running(), dead_letter_id, actor, note)
    console.print(literal(f"discarded {dead_letter_id}"))
