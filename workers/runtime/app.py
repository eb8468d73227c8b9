"""The Faust worker around a stage: one app per stage, its agents, timers and lifecycle.

Each stage runs as its own Faust worker (consumer group `toolgate-<stage>`), with the web
server off, its own data directory, and short group timeouts (Tansu's JoinGroup waits for
them). Topics are provisioned by the catalog, never declared by Faust.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any

import faust
from faust.types import EventT

from toolgate.integrity import Sealer, deployment_keys
from toolgate.kafka_security import broker_credentials
from toolgate.settings import Settings
from toolgate.telemetry import configure_telemetry, logging_config, shutdown_telemetry
from toolgate.topics.catalog import Topics
from toolgate.topics.headers import Headers
from toolgate.workers.runtime import liveness, orphan
from toolgate.workers.runtime.audit import AuditSink
from toolgate.workers.runtime.filling import Bounds, Filling, bounds_for
from toolgate.workers.runtime.handler import Handler
from toolgate.workers.runtime.intake import INTERNAL_SOURCES, RawRecord
from toolgate.workers.runtime.rounds import Rounds
from toolgate.workers.runtime.transport import App

log = logging.getLogger("toolgate.worker")

# A round cut short by shutdown gets this long to finish; otherwise the process exits
# without committing, and the round's input is redelivered.
SHUTDOWN_GRACE_S = 20.0
EXIT_UNFINISHED_ROUND = 70


def broker_urls(bootstrap: str) -> list[str]:
    return [f"kafka://{host.strip()}" for host in bootstrap.split(",") if host.strip()]


class StageApp:
    def __init__(self, name: str, settings: Settings, sources: Sequence[str] = ()) -> None:
        """A worker of stage `name`, whose handlers will consume the logical topics `sources`."""
        self.name = name
        self.settings = settings.require_infrastructure()
        self.topics = Topics(settings.topic_prefix)
        # Holding the deployment secret is what makes this process a stage (toolgate.integrity).
        self.sealer = Sealer(deployment_keys(settings), self.topics)
        self.audits = AuditSink(settings.database_url, name)
        # Faust keeps table state here; stages use no tables, so workers of a stage can share it.
        datadir = settings.home / "faust" / f"{settings.topic_prefix}{name}"
        datadir.parent.mkdir(parents=True, exist_ok=True)
        self.app = App(
            f"{settings.topic_prefix}toolgate-{name}",
            broker=broker_urls(settings.kafka_bootstrap),
            broker_credentials=broker_credentials(settings),
            web_enabled=False,
            datadir=str(datadir),
            topic_allow_declare=False,
            topic_disable_leader=True,
            consumer_auto_offset_reset="earliest",
            broker_session_timeout=settings.session_timeout_s,
            broker_heartbeat_interval=settings.heartbeat_interval_s,
            broker_max_poll_interval=settings.max_poll_interval_s,
            # A poll returns at most a few rounds' worth: a poll returning a whole backlog kept the
            # consumer unpolled past max_poll_interval, and aiokafka then leaves the group and does
            # not rejoin while unpolled: the stage stalled, up and idle (test_poll_interval).
            broker_max_poll_records=min((self._bounds(s).poll_records for s in sources), default=settings.batch_max),
            broker_commit_interval=1.0,
            producer_linger_ms=settings.linger_ms,
            # aiokafka's default batch (16 KiB) holds about ten observations: a round's 500 sends
            # then queued behind each other, every waiter woken (with a timer) at each drain, and
            # that was a third of normalization's CPU. One batch per partition holds a round.
            producer_max_batch_size=settings.batch_bytes,
            producer_acks=-1,
            stream_wait_empty=False,
            logging_config=logging_config(settings.log_level),
        )
        self.app.fetch_max_wait_ms = settings.fetch_wait_ms
        self._ready = False
        self._consumes = False
        self.app.on_partitions_assigned.connect(self._on_assigned)

    # --- producing ---------------------------------------------------------------------------

    async def send(
        self, topic: str, key: bytes | None, value: bytes, partition: int | None, headers: Headers
    ) -> Awaitable[Any]:
        fut: Awaitable[Any] = await self.app.producer.send(topic, key, value, partition, None, headers)
        return fut

    # --- consuming ---------------------------------------------------------------------------

    def consume(self, handler: Handler[Any]) -> None:
        # Iterated, as a Stream would: the conductor hands a record it cannot queue at once
        # (the buffer is full) to the channel's `put`, which a Topic accepts only from an
        # iterated channel; the non-iterated one raised there and the record was lost.
        topic = self.app.topic(
            self.topics.name(handler.source),
            key_type=bytes,
            value_type=bytes,
            key_serializer="raw",
            value_serializer="raw",
            maxsize=self._bounds(handler.source).buffer_records,
        ).__aiter__()
        rounds = Rounds(handler, self.topics, self.send, self.settings.batch_bytes, self.sealer, self.audits.write)
        batch_max, batch_bytes = self.settings.batch_max, self.settings.batch_bytes
        within = self.settings.batch_ms / 1000.0
        self._consumes = True
        # The topic is one of the app's channels (iterating it added it to app.topics): Faust's
        # consumer subscribes to it, fetches, applies flow control and commits acked offsets.
        # Rounds are drained from the channel's queue directly rather than through a Stream,
        # whose per-event bookkeeping (a task, processors and context per record) cost more
        # than the stage's own work.

        async def drain() -> None:
            await handler.start()
            queue = topic.queue
            loop = asyncio.get_running_loop()
            while True:
                round_ = Filling(await queue.get(), batch_max, batch_bytes)
                round_.take(queue)
                # A record with nothing queued behind it starts its round at once; a round
                # lingers to fill only while records are arriving.
                deadline = loop.time() + within
                while len(round_.events) > 1 and not round_.full:
                    left = deadline - loop.time()
                    if left <= 0:
                        break
                    await asyncio.sleep(min(left, 0.002))  # cheaper than a wait_for task per record
                    round_.take(queue)
                await self._guarded(rounds.run([_raw(e) for e in round_.events]))
                # Only now, with every output acknowledged by the broker, may the offsets go.
                for event in round_.events:
                    event.ack()

        drain.__name__ = f"{self.name}_{handler.source}"
        self.app.task(drain)

    def _bounds(self, source: str) -> Bounds:
        internal = source in INTERNAL_SOURCES
        return bounds_for(internal, self.settings.batch_max, self.settings.stream_buffer)

    def every(self, seconds: float, job: Callable[[], Coroutine[Any, Any, None]], name: str) -> None:
        """Run `job` every `seconds`; a failing run is logged and the next one still comes."""

        async def timer() -> None:
            while True:
                started = time.monotonic()
                try:
                    await self._guarded(job(), tolerate=True)
                except asyncio.CancelledError:
                    raise
                await asyncio.sleep(max(0.0, seconds - (time.monotonic() - started)))

        timer.__name__ = name
        self.app.task(timer)

    def task(self, job: Callable[[], Coroutine[Any, Any, None]], name: str) -> None:
        job.__name__ = name
        self.app.task(job)

    async def _guarded(self, work: Coroutine[Any, Any, None], tolerate: bool = False) -> None:
        """Run one round to completion even if shutdown cancels us meanwhile.

        Faust acks a round's input when the agent asks for the next round, even after an
        exception; so a round either completes, or the process exits without committing.
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

    async def _on_assigned(self, app: Any, /, *_: Any, **__: Any) -> None:
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
        if not self._consumes:
            # No topic to consume (outbox relay, reconciliation): run timers, tasks and the
            # producer, without a consumer group.
            self.app.producer_only = True
            self.app.task(self._ready_now)
        else:
            self.app.task(self._watch_consumer)
        worker = faust.Worker(self.app, loglevel=self.settings.log_level, redirect_stdouts=False, quiet=True)
        try:
            worker.execute_from_commandline()
        finally:
            shutdown_telemetry()

    async def _watch_consumer(self) -> None:
        await liveness.watch(self.app, self.name)

    async def _ready_now(self) -> None:
        self.mark_ready()


def _raw(event: EventT[Any]) -> RawRecord:
    msg = event.message
    headers = msg.headers or ()
    pairs = list(headers.items()) if isinstance(headers, Mapping) else list(headers)
    return RawRecord(msg.partition, msg.offset, msg.key, msg.value, pairs)
