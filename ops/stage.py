"""`toolgate worker STAGE`: one stage's worker in this process (what `toolgate up` starts for
each stage). The reconciliation worker also samples the deployment's gauges (ops/gauges.py),
which read what `toolgate status` reads.

A worker whose contracts or policy cannot be admitted (a contract document, the Cedar policy
set or its budgets: `ContractRefused`) does not start: it says why, every problem
named, in its log and on stderr, and exits with status 1."""

from __future__ import annotations

import logging

from toolgate.contracts.admission import ContractRefused
from toolgate.settings import Settings
from toolgate.telemetry.logs import configure_logging
from toolgate.workers.stages import build

log = logging.getLogger("toolgate.stage")


def run_stage(stage: str, settings: Settings) -> None:
    """Log as the deployment says, then run the stage until it is stopped."""
    configure_logging(settings.log_level)
    try:
        app = build(stage, settings)
    except ContractRefused as exc:
        log.error("refused to start", extra={"stage": stage, "action": "refused_to_start", "error": str(exc)})
        raise SystemExit(f"toolgate worker {stage} refused to start: {exc}") from None
    if stage == "reconciliation":
        from toolgate.contracts.registry import load_registry
        from toolgate.ops.gauges import Gauges

        gauges = Gauges(load_registry(settings.contracts_dir), settings)
        app.every(settings.metrics_sample_seconds, gauges.sample, "gauges")
    app.run()
