"""Which handlers, timers and tasks make up each stage's worker (`toolgate worker <stage>`)."""

from __future__ import annotations

from toolgate.contracts.registry import load_registry
from toolgate.settings import Settings
from toolgate.workers.runtime.app import StageApp
from toolgate.workers.runtime.span_attributes import use_registry

STAGES = (
    "validation",
    "policy",
    "approval-wait",
    "execution",
    "outbox-relay",
    "normalization",
    "reconciliation",
)


def build(name: str, settings: Settings) -> StageApp:
    if name not in STAGES:
        raise SystemExit(f"unknown stage {name!r}; one of {', '.join(STAGES)}")
    registry = load_registry(settings.contracts_dir)
    use_registry(registry)  # what spans and metrics name a call's contract by
    app = StageApp(name, settings)
    if name == "validation":
        from toolgate.workers.validation.handler import ValidationHandler

        app.consume(ValidationHandler(registry, settings))
    elif name == "policy":
        from toolgate.workers.policy.handler import PolicyHandler

        app.consume(PolicyHandler(registry, settings))
    elif name == "approval-wait":
        from toolgate.workers.approval.decisions import DecisionsHandler
        from toolgate.workers.approval.held import AuthorizedHandler
        from toolgate.workers.approval.sweep import ExpirySweeper

        app.consume(AuthorizedHandler(registry, settings))
        app.consume(DecisionsHandler(registry, settings))
        app.every(settings.approval_sweep_seconds, ExpirySweeper(registry, settings).sweep, "approval_expiry")
    elif name == "execution":
        from toolgate.workers.execution.handler import ExecutionHandler

        app.consume(ExecutionHandler(registry, settings))
    elif name == "outbox-relay":
        from toolgate.workers.outbox.relay import attach

        attach(app, settings)
    elif name == "normalization":
        from toolgate.workers.normalization.handler import NormalizationHandler

        app.consume(NormalizationHandler(registry, settings))
    else:
        from toolgate.contracts.policy import load_policy
        from toolgate.workers.reconciliation.pruner import Pruner
        from toolgate.workers.reconciliation.reconciler import Reconciler

        reconciler = Reconciler(registry, settings)
        pruner = Pruner(registry, load_policy(settings.policy_file), settings)

        async def reconcile() -> None:
            await reconciler.reconcile_once()

        async def prune() -> None:
            await pruner.prune_once()

        app.every(settings.reconcile_interval_seconds, reconcile, "reconcile")
        app.every(settings.retention_interval_seconds, prune, "retention")
    return app
