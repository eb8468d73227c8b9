"""The normalization worker: tool.results -> tool.observations (one record per call, keyed by run_id)."""

from __future__ import annotations

from toolgate.contracts.registry import Registry
from toolgate.schemas.models import ExecutionResult, ObservationError
from toolgate.taxonomy import Taxonomy
from toolgate.workers.normalization.decision import build, normalize
from toolgate.workers.runtime.emit import Emit
from toolgate.workers.runtime.rounds import Handler, Inbound

STAGE = "normalization"


class NormalizationHandler(Handler[ExecutionResult]):
    stage = STAGE
    source = "results"
    model = ExecutionResult

    def __init__(self, registry: Registry) -> None:
        self.registry = registry

    async def handle(self, calls: list[Inbound[ExecutionResult]], out: Emit) -> None:
        for call in calls:
            res = call.model
            normalized = normalize(res, self.registry)
            out.record(
                "observations",
                normalized.observation,
                key=res.run_id,
                traceparent=call.traceparent,
                call_id=res.call_id,
                tenant_id=res.tenant_id,
            )
            out.outcomes[res.call_id] = str(normalized.observation.status.taxonomy_class)
            if normalized.problem:
                out.dead_letter(
                    call.origin, call.raw, Taxonomy.OBSERVATION_NORMALIZATION_FAIL, normalized.problem, res.call_id
                )

    def on_failure(self, call: Inbound[ExecutionResult], error: str, out: Emit) -> None:
        res = call.model
        observation = build(
            res,
            None,
            [
                ObservationError(
                    field=None,
                    code="internal_error",
                    message="the result could not be normalized inside toolgate; an operator has it",
                )
            ],
            Taxonomy.OBSERVATION_NORMALIZATION_FAIL,
        )
        out.record(
            "observations",
            observation,
            key=res.run_id,
            traceparent=call.traceparent,
            call_id=res.call_id,
            tenant_id=res.tenant_id,
        )
