"""`toolgate status` for people: the report (ops/status.py) as tables on a console."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from toolgate.ops.health import Severity
from toolgate.ops.snapshot import BrokerCluster, Lag, Process
from toolgate.ops.status import Report
from toolgate.workers.stages import STAGES


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def _lag_cell(lag: Lag | None) -> str:
    if lag is None:
        return "?"
    if lag.records is None:
        return "none: reads Postgres"
    return f"{'≥' if not lag.exact else ''}{lag.records}"


def _broker_line(cluster: BrokerCluster) -> str:
    """e.g. `broker: kafka 4.4.0, 3 nodes: kafka-1 127.0.0.1:9092 serving, ...`."""
    what = " ".join(part for part in (cluster.broker, cluster.version) if part)
    state = {True: "serving", False: "[red]not serving[/red]", None: "?"}
    nodes = ", ".join(f"{escape(n.name)} {escape(n.address)} {state[n.serving]}" for n in cluster.nodes)
    return f"broker: {escape(what)}, {len(cluster.nodes)} node(s)" + (f": {nodes}" if nodes else "")


def render(result: Report, console: Console) -> None:
    s = result.snapshot
    lag = {lag.stage: lag for lag in s.lags}
    table = Table(title=f"toolgate status  ({escape(s.home)})")
    for column in ("process", "pid", "running", "ready", "restarts", "consumer lag (records)"):
        table.add_column(column)
    shown = [p for p in s.processes if p.name in STAGES] or [Process(stage, None, False) for stage in STAGES]
    rows = [*shown, *(p for p in s.processes if p.name not in STAGES), *s.infrastructure]
    if s.supervisor is not None:
        rows.append(s.supervisor)
    for p in rows:
        table.add_row(
            p.name,
            str(p.pid) if p.pid else "-",
            "-" if s.supervisor is None else ("yes" if p.alive else "[red]no[/red]"),
            {True: "yes", False: "[yellow]no[/yellow]", None: ""}[p.ready],
            str(p.restarts) if p.restarts else "",
            _lag_cell(lag.get(p.name)) if p.name in STAGES else "",
        )
    console.print(table)
    if s.broker is not None:
        console.print(_broker_line(s.broker))
    state = Table(title="in flight")
    for column in ("what", "count", "oldest"):
        state.add_column(column)
    for what, part, count, age in (
        ("idempotency keys PENDING", s.keys, "pending", "oldest_age_s"),
        ("approvals waiting", s.approvals, "pending", "oldest_age_s"),
        ("outbox rows unsent", s.outbox, "unsent", "oldest_age_s"),
        ("dead letters open", s.dead_letters, "open", None),
    ):
        if part is None:  # not read: the findings say why
            state.add_row(what, "?", "?")
        else:
            state.add_row(what, str(getattr(part, count)), _age(getattr(part, age)) if age else "")
    console.print(state)
    for f in result.findings:
        color = "red" if f.severity is Severity.UNHEALTHY else "yellow"
        console.print(f"[{color}]{f.severity}[/{color}]  {escape(f.subject)}: {escape(f.reason)}")
    bad = sum(1 for f in result.findings if f.severity is Severity.UNHEALTHY)
    console.print("[green]healthy[/green]" if result.healthy else f"[red]unhealthy: {bad} reason(s)[/red]")
