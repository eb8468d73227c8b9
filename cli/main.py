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
from toolgate.cli.evidence_verify import evidence_app
from toolgate.cli.policy import policy_app
from toolgate.cli.secret import secret_app
from toolgate.cli.tools import tools_app
from toolgate.cli.webhooks import webhooks_app
from toolgate.cli.witness import witness_app

app = typer.Typer(
    no_args_is_help=True, add_completion=False, help="toolgate: the deterministic edge for agents' tool calls."
)
app.add_typer(approvals_app, name="approvals")
app.add_typer(approvers_app, name="approvers")
app.add_typer(tenants_app, name="tenants")
app.add_typer(agents_app, name="agents")
app.add_typer(dlq_app, name="dlq")
app.add_typer(audit_app, name="audit")
app.add_typer(evidence_app, name="evidence")
app.add_typer(secret_app, name="secret")
app.add_typer(contracts_app, name="contracts")
app.add_typer(policy_app, name="policy")
app.add_typer(tools_app, name="tools")
app.add_typer(webhooks_app, name="webhooks")
app.add_typer(witness_app, name="witness")

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
