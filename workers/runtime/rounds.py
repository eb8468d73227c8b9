"""One round of a stage: read, decide, audit, produce, and only then let its offsets go.

The order is fixed: take up to N records or T ms from the consumer; read them (`intake`: MAC
check, decoding, dead letters for what cannot be read); open one span per call, a child of the
trace the call carries (`round_telemetry`); run the stage's batch decision (`handler`: one round
of Postgres work for all calls); write the audit entries the round produced outside a handler's
transaction (the refusals of records that prove nobody collapsed into counts: `refusals`);
produce every output and wait for the broker's acknowledgements (`delivery`); tell the handler
they are delivered; then return, so the worker stores the input records' offsets
(workers/runtime/app.py).

Failures: a transient one (Postgres restarting, broker unreachable) retries the round, since
its input is fine (`transient`); any other exception falls back to deciding call by call, and a
call that still fails alone is answered by its handler's `on_failure` (UNKNOWN_ERROR, fail
closed) and dead-lettered, and the others go on. Nothing escapes: the worker treats an
exception out of a round as a broken runtime and exits without storing the round's offsets.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Generic

from toolgate.faults import crash_point
from toolgate.schemas.models import TaxonomyClass
from toolgate.store import observations
from toolgate.store.audit import Entry
from toolgate.store.observations import Published
from toolgate.topics.catalog import Topics
from toolgate.topics.consumed import Read
from toolgate.trust.integrity import Sealer
from toolgate.workers.runtime.clock import now_ms
from toolgate.workers.runtime.delivery import Delivery, Send
from toolgate.workers.runtime.emit import Emit
from toolgate.workers.runtime.freshness import Bound
from toolgate.workers.runtime.handler import Handler, Inbound, M
from toolgate.workers.runtime.intake import Intake
from toolgate.workers.runtime.refusals import Tally
from toolgate.workers.runtime.round_telemetry import RoundTelemetry
from toolgate.workers.runtime.transient import ROUND, Sleep, TransientRetry

log = logging.getLogger("toolgate.round")

AuditWriter = Callable[[list[Entry]], Awaitable[None]]
Clock = Callable[[], float]
REFUSAL_WINDOW_MS = 60_000  # a round's own tally of refusals, when its stage gives it none


class Rounds(Generic[M]):
    """Runs rounds of `handler` over records of its source topic.

    Its collaborators come in: `send` produces one record (the app's producer), `audit` writes
    audit entries (`AuditSink.write`), `refusals` tallies the stage's unproven refusals (one per
    stage process, shared by its rounds), `clock` times a round, `wall_ms` dates the tally's
    windows and `sleep` waits between retries.
    """

    def __init__(
        self,
        handler: Handler[M],
        topics: Topics,
        send: Send,
        batch_bytes: int,
        sealer: Sealer,
        audit: AuditWriter,
        bound: Bound,
        *,
        refusals: Tally | None = None,
        clock: Clock = time.perf_counter,
        wall_ms: Callable[[], int] = now_ms,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.handler = handler
        self.audit = audit
        self.refusals = refusals if refusals is not None else Tally(REFUSAL_WINDOW_MS)
        self.clock = clock
        self.wall_ms = wall_ms
        self.retry = TransientRetry(
            ROUND, log, "transient failure, retrying the round", {"stage": handler.stage}, sleep=sleep
        )
        self.intake = Intake(handler, topics.name(handler.source), sealer, bound)
        self.delivery = Delivery(
            handler.stage, topics, send, batch_bytes, sealer, self.retry.pause, keep=self._keep_observations
        )
        self.telemetry = RoundTelemetry(handler.stage)

    async def run(self, records: Sequence[Read]) -> None:
        started = self.clock()
        out = Emit(self.handler.stage)
        calls = self.intake.decode(records, out)
        self.telemetry.open_spans(calls)
        decided = await self._decide(calls)
        refused = self.refusals.admit([*out.refusals, *decided.refusals], self.wall_ms())
        await self._audit([*out.audits, *decided.audits, *refused])
        for call_out in (out, decided):
            await self.delivery.flush(call_out)
        crash_point("stage.after_produce")
        await self.handler.delivered(decided)
        self.telemetry.close_spans(calls, decided)
        dead = len(out.dead_letters) + len(decided.dead_letters)
        self.telemetry.round_done(self.clock() - started, len(calls), dead)

    async def _keep_observations(self, rows: list[Published]) -> None:
        """Store the observations a flush is about to send, on the handler's pool (retried while
        Postgres is away: the round's records wait for it, as they wait for the broker)."""

        async def store() -> None:
            async with self.handler.pool.connection() as conn:
                await observations.keep(conn, rows)

        await self.retry.run(store)

    async def _handle(self, calls: list[Inbound[M]]) -> Emit:
        out = Emit(self.handler.stage)
        await self.handler.handle(calls, out)
        return out

    async def _decide(self, calls: list[Inbound[M]]) -> Emit:
        if not calls:
            return Emit(self.handler.stage)
        try:
            return await self.retry.run(lambda: self._handle(calls))
        except Exception:
            log.exception(
                "round failed; deciding call by call",
                extra={"stage": self.handler.stage, "action": "isolate", "count": len(calls)},
            )
            return await self._one_by_one(calls)

    async def _one_by_one(self, calls: list[Inbound[M]]) -> Emit:
        merged = Emit(self.handler.stage)
        for call in calls:
            try:
                out = await self.retry.run(partial(self._handle, [call]))
            except Exception as exc:
                log.exception(
                    "call failed",
                    extra={"stage": self.handler.stage, "action": "fail_closed", "call_id": call.call_id},
                )
                out = Emit(self.handler.stage)
                reason = f"{type(exc).__name__}: {exc}"
                self.handler.on_failure(call, reason, out)
                out.dead_letter(call.origin, call.raw, TaxonomyClass.UNKNOWN_ERROR, reason, call.call_id)
            merged.merge(out)
        return merged

    async def close_windows(self, everything: bool = False) -> None:
        """Audit the refusals collapsed in windows that closed by now (with `everything`, in every
        open window: the stage stops). The stage calls it between rounds."""
        await self._audit(self.refusals.drain() if everything else self.refusals.due(self.wall_ms()))

    async def _audit(self, entries: list[Entry]) -> None:
        """Audit what the round refused outside a handler's transaction, before producing."""
        if not entries:
            return
        try:
            await self.retry.run(lambda: self.audit(entries))
        except Exception:
            log.exception("audit write failed", extra={"stage": self.handler.stage, "action": "audit_failed"})
