"""Normalization and the registered tenants (workers/normalization/handler.py), on a real Postgres:
a tenant registered a moment after normalization last read the tenants has its first result
observed, not dead-lettered as unregistered; a tenant nobody registered still is."""

from __future__ import annotations

import asyncio
import uuid

from tests.unit.factories import sample_models
from toolgate.contracts.registry import load_registry
from toolgate.schemas.codec import codec
from toolgate.schemas.models import ExecutionResult, PayloadKind
from toolgate.workers.normalization.handler import NormalizationHandler
from toolgate.workers.runtime.clock import now_ms
from toolgate.workers.runtime.emit import Emit, Origin
from toolgate.workers.runtime.handler import Inbound

from .conftest import Database

TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def result_of(tenant: str) -> Inbound[ExecutionResult]:
    base: ExecutionResult = sample_models()[ExecutionResult]
    result = base.model_copy(update={"tenant_id": tenant, "call_id": f"call_{uuid.uuid4().hex}"})
    origin = Origin("results", 0, now_ms(), None, [], PayloadKind.RECORD)
    return Inbound(result, codec().encode(result), origin, traceparent=TRACE)


def unregistered(out: Emit) -> list[str]:
    return [letter.reason for letter in out.dead_letters if "is not registered" in letter.reason]


def test_a_tenant_registered_after_the_last_reading_has_its_first_result_observed(database: Database) -> None:
    known, new, nobody = (f"t{uuid.uuid4().hex[:8]}" for _ in range(3))
    database.sql("INSERT INTO toolgate.tenants (tenant_id) VALUES (%s)", (known,))

    async def rounds() -> tuple[Emit, Emit, Emit]:
        handler = NormalizationHandler(load_registry(), database.settings)
        await handler.start()
        try:
            first, second, third = Emit("normalization"), Emit("normalization"), Emit("normalization")
            await handler.handle([result_of(known)], first)  # reads the tenants: `known` is one
            database.sql("INSERT INTO toolgate.tenants (tenant_id) VALUES (%s)", (new,))  # a moment later
            await handler.handle([result_of(new)], second)
            await handler.handle([result_of(nobody)], third)
            return first, second, third
        finally:
            await handler.pool.close()

    first, second, third = asyncio.run(rounds())
    for out, tenant in ((first, known), (second, new)):
        assert unregistered(out) == []
        assert [r.topic for r in out.records] == [f"tool.observations.{tenant}"]
    assert third.records == []
    assert unregistered(third) == [f"tenant {nobody!r} is not registered: it has no observation topic"]
