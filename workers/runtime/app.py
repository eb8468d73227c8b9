"""The worker around a stage: its consumer, producer, timers and lifecycle, on one event loop.

Each stage runs as a process of its own: a consumer group `toolgate-<stage>` over the topics
its handlers read (`consumer`), one producer for everything its rounds write (`producer`), its
timers and tasks, until SIGTERM or SIGINT. Topics are provisioned by the catalog, never here.

Both Kafka clients are confluent-kafka's (librdkafka). The stages ran on Faust before; its
per-record path (tasks, a consumer thread handing records over, aiokafka in Python) was a good
share of validation's CPU, and every hop waited longer for a record than librdkafka makes it
(docs/performance.md, "Figures behind the code").

The event loop is uvloop's (libuv). A round's Postgres statements each wait on the loop (psycopg's
async connection), and asyncio's own loop spent more CPU on each wait: a statement, and a
transaction, cost the client less on uvloop's (docs/performance.md, "Figures behind the code").
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from functools import partial
from typing import Any

import uvloop

from toolgate.schemas.codec import codec
from toolgate.settings import Settings
from toolgate.store.audit import AuditSink, use_keyset
from toolgate.telemetry.setup import configure_telemetry, shutdown_telemetry
from toolgate.topics.catalog import Topics, stage_group
from toolgate.topics.consumed import Read
from toolgate.topics.producers import Record
from toolgate.trust.integrity import Sealer, deployment_keys
from toolgate.workers.runtime import heap, liveness, orphan
from toolgate.workers.runtime.alarm import Alarm
from toolgate.workers.runtime.consumer import StageConsumer
from toolgate.workers.runtime.filling import Bounds, Filling, bounds_for
from toolgate.workers.runtime.freshness import Bound
from toolgate.workers.runtime.handler import Handler
from toolgate.workers.runtime.intake import INTERNAL_SOURCES
from toolgate.workers.runtime.key_holders import KeyHolders
from toolgate.workers.runtime.producer import StageProducer
from toolgate.workers.runtime.refusals import Tally
from toolgate.workers.runtime.rounds import Rounds
from toolgate.workers.runtime.wakeup import Listener, announcer
from toolgate.workers.runtime.wakeup import woken as wakes

log = logging.getLogger("toolgate.worker")

# A round cut short by shutdown gets this long to finish; otherwise the process exits
# without committing, and the round's input is redelivered.
SHUTDOWN_GRACE_S = 20.0
EXIT_UNFINISHED_ROUND = 70
EXIT_TASK_ENDED = 73

Job = Callable[[], Coroutine[Any, Any, None]]


class StageApp:
    def __init__(self, name: str, settings: Settings, sources: Sequence[str] = ()) -> None:
        """A worker of stage `name`, whose handlers will consume the logical topics `sources`."""
        self.name = name
        self.settings = settings.require_infrastructure()
        self.topics = Topics(settings.topic_prefix)
        self.group = stage_group(settings.topic_prefix, name)
        # Holding the deployment secret is what makes this process a stage (toolgate.trust.integrity);
        # its keyset is read again as it runs, and which keys it holds is reported (key_holders).
        keys = deployment_keys(settings)
        self.sealer = Sealer(keys, self.topics)
        use_keyset(keys)
        self.audits = AuditSink(settings.database_url, name)
        # This process's refusals of records that prove nobody, collapsed into counts (refusals.py).
        self.refusals = Tally(int(settings.refusal_audit_seconds * 1000))
        self._rounds: dict[str, Rounds[Any]] = {}  # by the physical topic each reads
        announcing = announcer(settings)
        self.producer = StageProducer(self.settings, self.group, announcing.delivered if announcing else None)
        self._handlers: dict[str, Handler[Any]] = {}  # by the physical topic each consumes
        self._jobs: list[tuple[str, Job]] = []
        self._ready = False
        holders = KeyHolders(settings.database_url, name, keys)
        self.every(settings.keyset_refresh_seconds, holders.report, "key-holders")

    # --- producing ---------------------------------------------------------------------------

    async def send(self, record: Record) -> Awaitable[Any]:
        return await self.producer.send(record)

    # --- consuming ---------------------------------------------------------------------------

    def consume(self, handler: Handler[Any]) -> None:
        self._handlers[self.topics.name(handler.source)] = handler

    def _bounds(self, source: str) -> Bounds:
        internal = source in INTERNAL_SOURCES
        return bounds_for(internal, self.settings.batch_max, self.settings.stream_buffer)

    async def _drain(self, consumer: StageConsumer) -> None:
        """Rounds, one source topic at a time, for as long as the stage runs."""
        fresh = Bound.of(self.settings)
        rounds = self._rounds = {
            topic: Rounds(
                handler,
                self.topics,
                self.send,
                self.settings.batch_bytes,
                self.sealer,
                self.audits.write,
                fresh,
                refusals=self.refusals,
            )
            for topic, handler in self._handlers.items()
        }
        codec()  # the schemas are read now, not in the first call's round
        for handler in self._handlers.values():
            await handler.start()
        heap.settle()
        batch_max, batch_bytes = self.settings.batch_max, self.settings.batch_bytes
        within = self.settings.batch_ms / 1000.0
        loop = asyncio.get_running_loop()
        while True:
            await consumer.wait()
            for each in rounds.values():  # they share one tally: the first audits what closed
                await self._guarded(each.close_windows(), tolerate=True)
            for topic in consumer.ready():
                pending = consumer.pending[topic]
                round_ = Filling(pending.popleft(), batch_max, batch_bytes)
                round_.take(pending)
                await round_.linger(partial(_refill, consumer, round_, topic), within, loop.time, asyncio.sleep)
                await self._guarded(rounds[topic].run(round_.records))
                # Only now, with every output acknowledged by the broker, may the offsets go.
                consumer.done(topic, round_.records)

    # --- timers and tasks ----------------------------------------------------------------------

    def every(self, seconds: float, job: Job, name: str, alarm: Alarm | None = None) -> None:
        """Run `job` every `seconds`, or when its `alarm` says (workers/runtime/alarm.py); a
        failing run is logged and the next one still comes."""

        async def timer() -> None:
            while True:
                started = time.monotonic()
                try:
                    await self._guarded(job(), tolerate=True)
                except asyncio.CancelledError:
                    raise
                if alarm is None:
                    await asyncio.sleep(max(0.0, seconds - (time.monotonic() - started)))
                else:
                    await alarm.sleep(seconds)

        self._jobs.append((name, timer))

    def task(self, job: Job, name: str) -> None:
        self._jobs.append((name, job))

    async def _guarded(self, work: Coroutine[Any, Any, None], tolerate: bool = False) -> None:
        """Run one round to completion even if shutdown cancels us meanwhile.

        A round's offsets are stored only once it completed; so a round either completes, or
        the process exits without storing them.
        """
        task = asyncio.ensure_future(work)
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            try:
                await asyncio.wait_for(asyncio.shield(task), SHUTDOWN_GRACE_S)
            except BaseException:
                log.critical(
                    "round unfinished at shutdown; exiting without commit",
                    extra={"stage": self.name, "action": "abort"},
                )
                os._exit(EXIT_UNFINISHED_ROUND)
            raise
        except Exception:
            if tolerate:
                log.exception("job failed", extra={"stage": self.name, "action": "job_failed"})
                return
            log.critical(
                "round runtime failed; exiting without commit",
                extra={"stage": self.name, "action": "abort"},
                exc_info=True,
            )
            os._exit(EXIT_UNFINISHED_ROUND)

    # --- readiness and running -------------------------------------------------------------

    def _on_assigned(self) -> None:
        # Ready once the group has given this worker its share, which may be no partitions
        # at all when a stage runs more workers than it has partitions.
        if not self._ready:
            self._ready = True
            self.mark_ready()

    def mark_ready(self) -> None:
        ready = self.settings.home / "ready"
        ready.mkdir(parents=True, exist_ok=True)
        (ready / f"{self.settings.topic_prefix}{self.name}.{os.getpid()}").write_text(str(time.time()))
        log.info("ready", extra={"stage": self.name, "action": "ready"})

    def run(self) -> None:
        configure_telemetry(self.settings, self.name)
        orphan.watch()
        try:
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                runner.run(self._main())
        finally:
            shutdown_telemetry()

    async def _main(self) -> None:
        """Run every task until a signal stops the stage, or a task ends, which none should."""
        loop = asyncio.get_running_loop()
        stopping = asyncio.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stopping.set)
        self.producer.start(loop)
        if self._handlers:
            # Connected, with the topics' metadata and their keys at hand before the first record.
            # Only a stage that consumes sends through this producer: the relay has its own, and
            # reconciliation writes Postgres alone, so neither makes one. On a secured cluster
            # reconciliation's principal may write nothing, and its idempotent producers, made
            # anyway, failed for good at once (CLUSTER_AUTHORIZATION_FAILED for a producer id).
            self.sealer.prepare(await self.producer.warm())
        consumer = None
        tasks = [asyncio.create_task(job(), name=name) for name, job in self._jobs]
        if self._handlers:
            bounds = {topic: self._bounds(handler.source) for topic, handler in self._handlers.items()}
            woken = wakes(self.settings, [h.source for h in self._handlers.values()])
            consumer = StageConsumer(self.settings, self.group, bounds, self._on_assigned, woken)
            if woken:  # its naps end when a stage delivers a record to what it reads
                Listener(self.settings.database_url, list(self._handlers), consumer.wake)
            tasks.append(asyncio.create_task(self._drain(consumer), name="rounds"))
            tasks.append(asyncio.create_task(liveness.watch(consumer, self.name), name="liveness"))
        else:
            # No topic to consume (outbox relay, reconciliation): timers, tasks and the producer.
            heap.settle()
            self.mark_ready()
        stop = asyncio.create_task(stopping.wait(), name="signals")
        done, _ = await asyncio.wait([stop, *tasks], return_when=asyncio.FIRST_COMPLETED)
        ended = [task for task in done if task is not stop]
        for task in ended:
            error = None if task.cancelled() else task.exception()
            log.critical(
                "task %s ended; stopping the stage",
                task.get_name(),
                extra={"stage": self.name, "action": "task_ended", "error": repr(error)},
                exc_info=error,
            )
        for task in [stop, *tasks]:
            task.cancel()
        await asyncio.gather(stop, *tasks, return_exceptions=True)
        await self._close_windows()
        for handler in self._handlers.values():
            try:
                await asyncio.wait_for(handler.stop(), SHUTDOWN_GRACE_S)
            except Exception:
                log.exception("handler did not stop cleanly", extra={"stage": self.name, "action": "stop_failed"})
        if consumer is not None:
            await asyncio.to_thread(consumer.close)
        await asyncio.to_thread(self.producer.close)
        if ended:
            os._exit(EXIT_TASK_ENDED)

    async def _close_windows(self) -> None:
        """Audit what the stage's open windows of collapsed refusals counted, as it stops."""
        for each in self._rounds.values():
            try:
                await asyncio.wait_for(each.close_windows(everything=True), SHUTDOWN_GRACE_S)
            except Exception:
                log.exception("refusals not audited", extra={"stage": self.name, "action": "audit_failed"})


def _refill(consumer: StageConsumer, round_: Filling[Read], topic: str) -> None:
    """Move what `consumer` has fetched of `topic` since onto the round being filled."""
    consumer.take()
    round_.take(consumer.pending[topic])
