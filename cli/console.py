"""`toolgate console`: the approval console in the browser (console/app.py); `toolgate up`
starts one and prints its URL."""

from __future__ import annotations

from typing import Annotated

import typer

from toolgate.cli.common import running


def console(
    port: Annotated[int, typer.Option(help="the port (0: settings' TOOLGATE_CONSOLE_PORT, else any free one)")] = 0,
    host: Annotated[str, typer.Option(help="the address (default: settings' TOOLGATE_CONSOLE_HOST)")] = "",
) -> None:
    """Serve the approval console: approvers' inbox and cards, decisions signed in the browser."""
    from dataclasses import replace

    from toolgate.console.app import serve
    from toolgate.ops.stack.processes import free_port

    settings = running()
    if host:
        settings = replace(settings, console_host=host)
    serve(settings, port or settings.console_port or free_port())
