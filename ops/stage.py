"""`toolgate worker STAGE`: one stage's worker in this process (what `toolgate up` starts for
each stage)."""

from __future__ import annotations

from toolgate.settings import Settings
from toolgate.telemetry import configure_logging
from toolgate.workers.stages import run


def run_stage(stage: str, settings: Settings) -> None:
    """Log as the deployment says, then run the stage until it is stopped."""
    configure_logging(settings.log_level)
    run(stage, settings)
