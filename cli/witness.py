"""A witness of another deployment's audit log: `witness keygen`, `witness serve`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

witness_app = typer.Typer(no_args_is_help=True, help="Witness a deployment's audit log checkpoints (run elsewhere).")


@witness_app.command("keygen")
def witness_keygen(
    key: Annotated[Path, typer.Option("--key", help="where to write the new private key (PEM)")],
    name: Annotated[str, typer.Option("--name", help="the witness's name, as its cosignatures carry it")],
) -> None:
    """Make a witness key (and KEY.vkey beside it); print its verifier key (name+key id+public
    key), for the deployment's TOOLGATE_AUDIT_WITNESSES."""
    from toolgate.ops.witness import keygen

    print(keygen(key, name))


@witness_app.command("serve")
def witness_serve(
    key: Annotated[Path, typer.Option("--key", help="the witness's private key (witness keygen)")],
    state: Annotated[Path, typer.Option("--state", help="the directory of what it cosigned")],
    log_key: Annotated[list[str], typer.Option("--log-key", help="the deployment's public key (hex); repeatable")],
    origin: Annotated[str, typer.Option("--origin", help="the log's origin line (TOOLGATE_AUDIT_ORIGIN)")],
    name: Annotated[str, typer.Option("--name", help="the witness's name (default: its key's .vkey's)")] = "",
    host: Annotated[str, typer.Option("--host")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port")] = 7380,
) -> None:
    """Serve c2sp.org/tlog-witness's add-checkpoint for one log, cosigning each checkpoint that
    extends the last it cosigned."""
    from toolgate.ops.witness import State, Witness, load_key, name_of, serve
    from toolgate.trust.ed25519 import PublicKey
    from toolgate.trust.signed_note import check_name

    keys = [PublicKey(bytes.fromhex(k.strip())) for k in log_key]
    private = load_key(key)
    serve(Witness(check_name(name or name_of(key, private)), private, State(state), {origin: keys}), host, port)
