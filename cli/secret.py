"""The deployment secret: `secret status` and `secret rotate` (ops/secret_rotation.py)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from toolgate.cli.common import console, print_json, running

if TYPE_CHECKING:
    from toolgate.ops.secret_rotation import Done, Key
    from toolgate.settings import Settings

secret_app = typer.Typer(no_args_is_help=True, help="The deployment secret: its keys, and rotating it.")


@secret_app.command("status")
def secret_status(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """The keyset's keys (by id: which seals, which are accepted, until when), what each stage
    on every host holds, and the next step of a rotation."""
    from toolgate.ops import secret_rotation as rotation
    from toolgate.trust.keyset import iso

    settings = running()
    keyset = rotation.read(settings)
    keys, holders = rotation.keys(keyset), rotation.holders(settings)
    found = rotation.blockers(settings, keyset, int(time.time() * 1000))
    if as_json:
        print_json(
            {
                "keys": [{**vars(k), "until": iso(k.until_ms) if k.until_ms else None} for k in keys],
                "holders": [vars(h) for h in holders],
                "next_step": keyset.step(),
                "blockers": found,
            }
        )
        return
    for key in keys:
        console.print(f"{key.key_id}  {_state(key)}")
    for h in holders:
        console.print(f"{escape(h.name)}: seals {h.seals}, accepts {' '.join(h.accepts)} (seen {h.age_s:.0f} s ago)")
    said = "safe now" if not found else "not yet: " + "; ".join(found)
    console.print(f"next step  {keyset.step()} (`toolgate secret rotate`): {escape(said)}")


def _state(key: Key) -> str:
    from toolgate.trust.keyset import KeyState, iso

    return {
        KeyState.CURRENT: "current: seals, accepted",
        KeyState.NEXT: "next: accepted, not sealing yet",
        KeyState.PREVIOUS: f"previous: accepted until {iso(key.until_ms or 0)}",
        KeyState.RETIRED: "retired: public half kept for `toolgate audit verify`",
    }[key.state]


@secret_app.command("rotate")
def secret_rotate(
    all_: Annotated[
        bool, typer.Option("--all", help="every step in turn, each once safe (hosts sharing one keyset file)")
    ] = False,
    grace: Annotated[
        float | None, typer.Option(help="seconds the key that sealed stays accepted (TOOLGATE_KEYSET_GRACE_SECONDS)")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="make the step even if not safe yet")] = False,
) -> None:
    """Make the next step of a rotation of the deployment secret on this host (stage a new key,
    promote it, retire the old one), and say what to do on every other host and when the next
    step is safe."""
    from toolgate.ops import secret_rotation as rotation

    settings = running()
    try:
        if all_:
            seen: set[str] = set()
            rotation.rotate_all(settings, lambda done: _said(settings, done), _once(seen), grace)
        else:
            _said(settings, rotation.rotate(settings, grace, force))
    except rotation.RotationRefused as exc:
        console.print(f"[red]{escape(str(exc))}[/red]")
        raise typer.Exit(1) from exc


def _once(seen: set[str]) -> Any:
    """A `wait` that says each thing awaited once."""

    def wait(what: str) -> None:
        if what not in seen:
            seen.add(what)
            console.print(f"waiting    {escape(what)}")

    return wait


def _said(settings: Settings, done: Done) -> None:
    from toolgate.trust.keyset import Step, iso

    key, path = done.key, done.path
    hosts = f"other hosts put {path} (0600) in place of theirs, as it is (or its content in your secret manager)"
    if done.step is Step.STAGE:
        console.print(f"staged     {key.key_id}: accepted by every stage once it reads the keyset, sealing nowhere yet")
        console.print(f"{hosts}; their stages read it within {settings.keyset_refresh_seconds:g} s")
        console.print(
            f"clients    that do not read this host's runtime.json: add {key.public_key} to "
            "TOOLGATE_DEPLOYMENT_PUBLIC_KEY (comma-separated) now"
        )
        console.print(
            "next       `toolgate secret rotate` (promote), once `toolgate secret status` shows every stage "
            f"on every host accepting {key.key_id} (it refuses before)"
        )
    elif done.step is Step.PROMOTE:
        assert done.other is not None and done.other.until_ms is not None
        until = iso(done.other.until_ms)
        console.print(f"promoted   {key.key_id} seals from now on; {done.other.key_id} is accepted until {until}")
        console.print(f"{hosts} now: until they do they seal with {done.other.key_id}, accepted until {until}")
        console.print(
            f"next       `toolgate secret rotate` (retire {done.other.key_id}) after {until}; "
            f"dead letters sealed by {done.other.key_id} can be replayed until then"
        )
    else:
        console.print(f"retired    {key.key_id}: its secret is gone from the keyset; its public half stays in it")
        console.print(f"{hosts}")
        console.print(
            f"clients    may drop {key.public_key} from TOOLGATE_DEPLOYMENT_PUBLIC_KEY; where `toolgate audit "
            "verify` runs, keep it (the checkpoints it signed are checked with it)"
        )
