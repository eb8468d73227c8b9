"""How the running system is doing: `status` (health) and `bench` (throughput and latency)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer

from toolgate.cli.common import console, print_json, running
from toolgate.settings import Settings


def status(
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
    max_lag: Annotated[int | None, typer.Option(help="records a stage may be behind (default 10000)")] = None,
    max_outbox_age: Annotated[
        float | None, typer.Option(help="seconds the oldest unsent outbox row may wait (default 30)")
    ] = None,
) -> None:
    """Health of the running system: each stage's processes, restarts and consumer lag, keys
    PENDING, approvals waiting, open dead letters, the outbox backlog. Exit 1 when unhealthy,
    with the reasons."""
    from toolgate.ops.status import limits_for, report
    from toolgate.ops.status_view import render

    settings = running()
    result = report(settings, limits_for(settings, max_lag=max_lag, max_outbox_age_s=max_outbox_age))
    print_json(result.as_json()) if as_json else render(result, console)
    if not result.healthy:
        raise typer.Exit(1)


def bench(
    tool: Annotated[str, typer.Option(help="tool to drive")] = "invoice.create_draft",
    calls: Annotated[int, typer.Option(help="number of proposals")] = 2000,
    rate: Annotated[float, typer.Option(help="offered calls per second; 0 = as fast as possible")] = 0.0,
    sequential: Annotated[
        int, typer.Option(help="N calls one at a time, each awaited before the next (replaces --calls)")
    ] = 0,
    agent: Annotated[str, typer.Option(help="the agent that signs (its key in the local keyring)")] = "cli",
    timeout: Annotated[float, typer.Option(help="seconds to wait for the last observation")] = 120.0,
    cpu: Annotated[bool, typer.Option("--cpu", help="also report each local process's CPU per call")] = False,
    sign_each: Annotated[bool, typer.Option("--sign-each", help="sign and publish every call alone")] = False,
    postgres_only: Annotated[
        bool, typer.Option("--postgres-only", help="measure only the execution stage's SQL, in a scratch database")
    ] = False,
    connections: Annotated[int, typer.Option(help="with --postgres-only: connections side by side")] = 2,
    batch: Annotated[int, typer.Option(help="with --postgres-only: calls per round")] = 200,
    via: Annotated[
        str, typer.Option(help="kafka (the client library) or mcp (the MCP door over HTTP, one call at a time)")
    ] = "kafka",
    ready_timeout: Annotated[float, typer.Option(help="seconds to wait for the local stages to be ready")] = 120.0,
    idle: Annotated[
        float, typer.Option(help="make no calls: report each local process's CPU over this many idle seconds")
    ] = 0.0,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Drive N proposals through the running pipeline; report calls/s, latency percentiles and
    the hop table: when calls reached each topic, from the records' own timestamps. With
    `--idle`, what the local stack costs while nothing happens."""
    from toolgate.ops.bench.run import run_bench

    settings, calls = running(), sequential or calls
    if postgres_only or idle > 0:
        print_json(_without_calls(settings, postgres_only, batch, connections, idle, ready_timeout))
        return
    if via == "mcp":
        from toolgate.ops.bench.mcp import run_mcp_bench

        with _exit_unless_ready():
            print_json(
                run_mcp_bench(settings, tool=tool, calls=calls, agent=agent, cpu=cpu, ready_timeout=ready_timeout)
            )
        return
    if via != "kafka":
        raise typer.BadParameter(f"--via {via}: kafka or mcp")
    with _exit_unless_ready():
        report = run_bench(
            settings,
            tool=tool,
            calls=calls,
            rate=0.0 if sequential else rate,
            agent=agent,
            timeout=timeout,
            progress=not as_json,
            cpu=cpu,
            sequential=sequential > 0,
            sign_each=sign_each,
            ready_timeout=ready_timeout,
        )
    _print_bench(report, as_json)


def _without_calls(
    settings: Settings, postgres_only: bool, batch: int, connections: int, idle: float, ready_timeout: float
) -> dict[str, Any]:
    """What `bench` measures without driving calls through the pipeline: the execution stage's
    SQL alone (`--postgres-only`), or the local stack at rest (`--idle`)."""
    if postgres_only:
        from toolgate.ops.bench.pgceiling import measure

        return measure(settings.database_url, batch=batch, connections=connections)
    from toolgate.ops.bench.idle import measure_idle

    with _exit_unless_ready():
        return measure_idle(settings, idle, ready_timeout=ready_timeout)


def _print_bench(report: dict[str, Any], as_json: bool) -> None:
    """The figures, then the hop table and where the slowest calls came from, as text (or all
    of it as JSON)."""
    if as_json:
        print_json(report)
        return
    from toolgate.ops.bench.stats import render_hops
    from toolgate.ops.bench.tail import render

    console.print_json(data={k: v for k, v in report.items() if k not in ("hops", "tail")})
    lines = [*render_hops(report["hops"]), *render(report["tail"])]
    console.print("\n".join(lines), highlight=False, soft_wrap=True)


@contextmanager
def _exit_unless_ready() -> Iterator[None]:
    """A bench whose local stages never became ready (ops/status.py `await_ready`) exits 1,
    naming them."""
    from toolgate.ops.status import NotReady

    try:
        yield
    except NotReady as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(1) from None
