"""The normalization handler: tool.results -> tool.observations.<tenant> (one record per call,
keyed by run_id, carrying the digest of the proposal it answers; sealed with the deployment's
signature on the way out). Results are scrubbed of the process's registered secrets (the
telemetry scrubber, passed to the decision).

Only registered tenants have an observation topic; a result for any other tenant (which no
toolgate stage should ever write) is dead-lettered instead of produced into the void.
"""

from __future__ import annotations

import asyncio
import time

from toolgate.contracts.registry import Registry
from toolgate.schemas.models import ExecutionResult, Observation, ObservationError, TaxonomyClass
from toolgate.scrubber import SCRUBBER
from toolgate.settings import Settings
from toolgate.store import tenants as registered
from toolgate.topics.headers import Address
from toolgate.workers.normalization.decision import build, normalize
from toolgate.workers.runtime.emit import Emit
from toolgate.workers.runtime.handler import Handler, Inbound

STAGE = "normalization"
REFRESH_S = 1.0  # the registered tenants are read at most this often, when a result names one not known yet


class NormalizationHandler(Handler[ExecutionResult]):
    stage = STAGE
    source = "results"
    model = ExecutionResult

    def __init__(self, registry: Registry, settings: Settings) -> None:
        super().__init__(registry, settings, max_size=1)
        self.tenants: frozenset[str] = frozenset()
        self._loaded_at = 0.0

        self.registry.compile_validators()

    async def _know(self, tenants: set[str]) -> None:
        """Every tenant the round names is known, or the registered tenants are read again, after
        the rest of REFRESH_S when the last reading is more recent: a tenant is judged unregistered
        only on a reading made after its result arrived, so one registered a moment after the
        last reading has its first observation published, not dead-lettered."""
        if tenants <= self.tenants:
            return
        wait = self._loaded_at + REFRESH_S - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        async with self.pool.connection() as conn:
            self.tenants = await registered.every(conn)
        self._loaded_at = time.monotonic()

    async def handle(self, calls: list[Inbound[ExecutionResult]], out: Emit) -> None:
        await self._know({c.model.tenant_id for c in calls})
        for call in calls:
            res = call.model
            if res.tenant_id not in self.tenants:
                out.dead_letter(
                    call.origin,
                    call.raw,
                    TaxonomyClass.OBSERVATION_NORMALIZATION_FAIL,
                    f"tenant {res.tenant_id!r} is not registered: it has no observation topic",
                    res.call_id,
                )
                continue
            normalized = normalize(res, self.registry, SCRUBBER)
            self._observe(call, normalized.observation, out)
            out.outcomes[res.call_id] = normalized.observation.status.taxonomy_class
            if normalized.problem:
                out.dead_letter(
                    call.origin, call.raw, TaxonomyClass.OBSERVATION_NORMALIZATION_FAIL, normalized.problem, res.call_id
                )

    def _observe(self, call: Inbound[ExecutionResult], observation: Observation, out: Emit) -> None:
        res = call.model
        address = Address.of(res, call.traceparent, key=res.run_id, proposal_digest=res.proposal_digest)
        out.record(self.topics.name("observations", res.tenant_id), observation, address)

    def on_failure(self, call: Inbound[ExecutionResult], error: str, out: Emit) -> None:
        if call.model.tenant_id not in self.tenants:
            return
        observation = build(
            call.model,
            None,
            [
                ObservationError(
                    field=None,
                    code="internal_error",
                    message="the result could not be normalized inside toolgate; an operator has it",
                )
            ],
            SCRUBBER,
            TaxonomyClass.OBSERVATION_NORMALIZATION_FAIL,
        )
        self._observe(call, observation, out)
