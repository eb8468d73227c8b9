"""`toolgate worker STAGE`: one stage's worker in this process (what `toolgate up` starts for
each stage). The reconciliation worker also samples the deployment's gauges (ops/gauges.py),
which read what `toolgate status` reads."""

from __future__ import annotations

from toolgate.settings import Settings
from toolgate.telemetry.logs import configure_logging
from toolgate.workers.stages import build


def run_stage(stage: str, settings: Settings) -> None:
    """Log as the deployment says, then run the stage until it is stopped."""
    configure_logging(settings.log_level)
    app = build(stage, settings)
    if stage == "reconciliation":
        from toolgate.contracts.registry import load_registry
        from toolgate.ops.gauges import Gauges

        gauges = Gauges(load_registry(settings.contracts_dir), settings)
        app.every(settings.metrics_sample_seconds, gauges.sample, "gauges")
    app.run()
