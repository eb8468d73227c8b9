"""Which handlers, timers and tasks make up each stage's worker (`toolgate worker <stage>`)."""

from __future__ import annotations

from typing import Any

from toolgate.contracts.registry import Registry, load_registry
from toolgate.settings import Settings
from toolgate.workers.runtime.app import StageApp
from toolgate.workers.runtime.handler import Handler
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
    if name == "approval-wait":
        return _approval_wait(registry, settings)
    app = _consuming(name, settings, _handlers(name, registry, settings))
    if name == "outbox-relay":
        from toolgate.workers.outbox.relay import attach
        from toolgate.workers.webhooks.courier import Courier

        attach(app, settings)
        app.task(Courier(settings).run, "webhook_courier")
    elif name == "reconciliation":
        _reconciliation(app, registry, settings)
    return app


def _consuming(name: str, settings: Settings, handlers: list[Handler[Any]]) -> StageApp:
    """The worker of stage `name`, consuming what `handlers` read."""
    app = StageApp(name, settings, [handler.source for handler in handlers])
    for handler in handlers:
        app.consume(handler)
    return app


def _handlers(name: str, registry: Registry, settings: Settings) -> list[Handler[Any]]:
    """The handlers of the topics `name` consumes (none for the relay and reconciliation)."""
    if name == "validation":
        from toolgate.workers.validation.handler import ValidationHandler

        return [ValidationHandler(registry, settings)]
    if name == "policy":
        from toolgate.workers.policy.handler import PolicyHandler

        return [PolicyHandler(registry, settings)]
    if name == "execution":
        from toolgate.workers.execution.handler import ExecutionHandler

        return [ExecutionHandler(registry, settings)]
    if name == "normalization":
        from toolgate.workers.normalization.handler import NormalizationHandler

        return [NormalizationHandler(registry, settings)]
    return []


def _approval_wait(registry: Registry, settings: Settings) -> StageApp:
    """Held calls and the approvers' decisions, and the sweep that escalates and expires
    tickets, woken when this worker opens one."""
    from toolgate.workers.approval.decisions import DecisionsHandler
    from toolgate.workers.approval.held import AuthorizedHandler
    from toolgate.workers.approval.sweep import ExpirySweeper

    sweeper = ExpirySweeper(registry, settings)
    held = AuthorizedHandler(registry, settings, sweeper.alarm.ring)
    app = _consuming("approval-wait", settings, [held, DecisionsHandler(registry, settings)])
    app.every(settings.approval_sweep_seconds, sweeper.sweep, "approval_expiry", sweeper.alarm)
    return app


def _reconciliation(app: StageApp, registry: Registry, settings: Settings) -> None:
    from toolgate.contracts.budgets import load_budgets
    from toolgate.workers.reconciliation.pruner import Pruner
    from toolgate.workers.reconciliation.reconciler import Reconciler
    from toolgate.workers.reconciliation.tree_heads import TreeHeads

    reconciler = Reconciler(registry, settings)
    pruner = Pruner(registry, load_budgets(settings.policy_dir), settings)
    tree_heads = TreeHeads(settings)

    async def reconcile() -> None:
        await reconciler.reconcile_once()

    async def prune() -> None:
        await pruner.prune_once()

    async def take_tree_head() -> None:
        await tree_heads.run_once()

    app.every(settings.reconcile_interval_seconds, reconcile, "reconcile")
    app.every(settings.retention_interval_seconds, prune, "retention")
    app.every(settings.audit_tree_seconds, take_tree_head, "audit_tree")
