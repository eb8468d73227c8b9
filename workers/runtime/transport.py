"""Faust's aiokafka transport, with the consumer's fetch wait that Faust does not expose.

Faust hard-codes `fetch_max_wait_ms=1500` for its consumer. Tansu does not always answer a
long poll early when data arrives, so every hop between stages waited up to that long
(measured: 150-540 ms per hop). A short wait bounds the hop latency; the cost is more fetch
requests while idle. The wait is `Settings.fetch_wait_ms`; a busy consumer never waits it out,
since the broker answers a fetch as soon as it has records for it.

(aiokafka's idempotent producer cannot be used here: its InitProducerId request fails
against Tansu 0.6 with UnknownError. Stage outputs are safe to duplicate: every consumer is
idempotent.)
"""

from __future__ import annotations

from typing import Any, cast

import faust
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TransportT


class _ConsumerThread(faust_aiokafka.AIOKafkaConsumerThread):
    def _create_worker_consumer(self, transport: Any) -> Any:
        consumer = super()._create_worker_consumer(transport)
        # Read by aiokafka when it builds its fetcher at start; Faust offers no setting for it.
        consumer._fetch_max_wait_ms = cast(App, self.app).fetch_max_wait_ms
        return consumer


class _Consumer(faust_aiokafka.Consumer):
    def _new_consumer_thread(self) -> faust_aiokafka.AIOKafkaConsumerThread:
        return _ConsumerThread(self, loop=self.loop, beacon=self.beacon)


class Transport(faust_aiokafka.Transport):
    Consumer = _Consumer


class App(faust.App):
    """faust.App on the transport above."""

    # How long the broker may hold a fetch that finds no records; set before the app starts.
    fetch_max_wait_ms: int = 25

    def _new_transport(self) -> TransportT:
        return Transport(self.conf.broker_consumer, self)

    def _new_producer_transport(self) -> TransportT:
        return Transport(self.conf.broker_producer, self)
