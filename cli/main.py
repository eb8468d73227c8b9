"""The `toolgate` app: every command group in the order `toolgate --help` lists them."""

from __future__ import annotations

import typer

from toolgate.cli import calls, deployment, mcp, recovery, status, whatif
from toolgate.cli.agents import agents_app, tenants_app
from toolgate.cli.approvals import approvals_app, approvers_app
from toolgate.cli.audit import audit_app
from toolgate.cli.console import console
from toolgate.cli.contracts import contracts_app
from toolgate.cli.dlq import dlq_app
from toolgate.cli.evidence import evidence_app
from toolgate.cli.policy import policy_app
from toolgate.cli.secret import secret_app
from toolgate.cli.tools import tools_app
from toolgate.cli.webhooks import webhooks_app
from toolgate.cli.witness import witness_app

app = typer.Typer(
    no_args_is_help=True, add_completion=False, help="toolgate: the deterministic edge for agents' tool calls."
)
GROUPS = {
    "approvals": approvals_app,
    "approvers": approvers_app,
    "tenants": tenants_app,
    "agents": agents_app,
    "dlq": dlq_app,
    "audit": audit_app,
    "evidence": evidence_app,
    "secret": secret_app,
    "contracts": contracts_app,
    "policy": policy_app,
    "tools": tools_app,
    "webhooks": webhooks_app,
    "witness": witness_app,
}
for name, group in GROUPS.items():
    app.add_typer(group, name=name)

COMMANDS = (
    deployment.up,
    deployment.worker,
    deployment.provider,
    deployment.setup,
    deployment.migrate,
    deployment.topics,
    status.status,
    calls.propose,
    calls.observe,
    calls.compensate,
    mcp.mcp,
    console,
    recovery.reconcile,
    recovery.redrive,
    recovery.prune,
    whatif.whatif,
    status.bench,
)
for command in COMMANDS:
    app.command()(command)


def main() -> None:
    app()
