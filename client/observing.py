"""Reading a tenant's observations (toolgate.client): the feed a waiting call is answered from,
a bounded scan for one call's latest answer, and every answer of a run."""

from __future__ import annotations

import time
from collections.abc import Generator, Iterable, Iterator, Sequence

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from toolgate.client.calls import Observed
from toolgate.client.edge import Edge, readable
from toolgate.client.feed import FETCH_WAIT_MS, ObservationFeed
from toolgate.schemas.codec import DecodeError, codec
from toolgate.schemas.models import Observation
from toolgate.topics.consumed import Consumed, Read, read
from toolgate.topics.ends import PastEnd, ToEnd
from toolgate.topics.headers import CALL_ID, PROPOSAL_DIGEST, header

ENDS_LIMIT_S = 10.0  # how long a listing waits for the broker to tell each partition's end


class ObservationsUnread(RuntimeError):
    """A listing of observations that could not be read to the end of the topic (a broker that
    did not answer in time): what it gave is not all there is."""


class Observing(Edge):
    """A tenant's observations: its feed (opened once, kept), a run's answers, one call's latest."""

    def _watch(self, tenant_id: str, call_id: str) -> tuple[tuple[int, int], ...]:
        """Have the tenant's observation feed keep what it hears of `call_id` from now on (the
        feed opens, where the topic ends, the first time); where the feed has read to."""
        feed = self._feed(tenant_id)
        feed.watch(call_id)
        return tuple(sorted(feed.positions.items()))

    def _feed(self, tenant_id: str) -> ObservationFeed[Observed]:
        """The tenant's observation feed, opened where its topic ends the first time it is asked for."""
        with self._feeds_lock:
            feed = self._feeds.get(tenant_id)
            if feed is None:
                feed = self._feeds[tenant_id] = self._open_feed(tenant_id)
        return feed

    def _open_feed(self, tenant_id: str) -> ObservationFeed[Observed]:
        consumer = self._consumer(FETCH_WAIT_MS)
        topic = self.topics.name("observations", tenant_id)
        try:
            start = {
                p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10.0)[1]
                for p in self._partitions(consumer, topic)
            }
        except BaseException:
            consumer.close()
            raise
        return ObservationFeed(consumer, topic, start, self._hear, also_read=self._unanswered.__contains__)

    def _hear(self, record: Consumed) -> Observed | None:
        """On a feed's thread: the observation a record carries, if genuine; the resend
        schedule hears of it."""
        seen = self._observed(record, None, None)
        if seen is not None:
            self._unanswered.heard(seen, time.monotonic())
        return seen

    def _end_offsets(self, tenant_id: str) -> tuple[tuple[int, int], ...]:
        consumer = self._consumer()
        try:
            topic = self.topics.name("observations", tenant_id)
            # High watermarks can under-count on Tansu: starting early only re-reads a little.
            return tuple(
                (p, consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10.0)[1])
                for p in self._partitions(consumer, topic)
            )
        finally:
            consumer.close()

    def observations(
        self,
        *,
        tenant_id: str,
        run_id: str | None = None,
        call_ids: Iterable[str] | None = None,
        follow: bool = False,
        idle_timeout: float = 2.0,
        start_offsets: Sequence[tuple[int, int]] = (),
        timeout: float | None = None,
    ) -> Iterator[Observed]:
        """A tenant's observations in arrival order, filtered by run and calls; a record without
        the deployment's signature is skipped. Without `follow`: every partition read to the end
        the broker tells (a quiet spell proves nothing on a broker slow to answer), and on until
        nothing new arrived for `idle_timeout` seconds, for late ones (0: stop at the ends);
        `ObservationsUnread` if a partition's end is not told within ENDS_LIMIT_S. With `follow`,
        on until `timeout` (if set). A start past its partition's end (a broker that came back
        empty) reads it from its beginning."""
        wanted = set(call_ids) if call_ids is not None else None
        consumer = self._consumer(eof=not follow)
        topic = self.topics.name("observations", tenant_id)
        try:
            starts = self._starts(consumer, topic, start_offsets)
            if not follow:
                starts = yield from self._to_ends(consumer, topic, starts, run_id, wanted)
            yield from self._polled(consumer, topic, starts, run_id, wanted, None if follow else idle_timeout, timeout)
        finally:
            consumer.close()

    def _to_ends(
        self, consumer: Consumer, topic: str, starts: dict[int, int], run_id: str | None, wanted: set[str] | None
    ) -> Generator[Observed, None, dict[int, int]]:
        """The observations from `starts` to each partition's end, and where each was read to. A
        partition whose log started over under its start (a broker that came back empty) is read
        from its beginning, as Apache Kafka's `earliest` resets it where the embedded Tansu does
        not (topics/ends.py). `ObservationsUnread` if an end was not told within ENDS_LIMIT_S."""
        reading = ToEnd(consumer, {(topic, p): at for p, at in starts.items()}, ENDS_LIMIT_S)
        yield from self._listed(reading, run_id, wanted)
        again = ToEnd(consumer, dict.fromkeys(reading.lost, OFFSET_BEGINNING), ENDS_LIMIT_S)
        yield from self._listed(again, run_id, wanted)
        short = reading.short + again.short + sorted(again.lost)
        if short:
            raise ObservationsUnread(f"the end of {short} was not told within {ENDS_LIMIT_S:g} s")
        return {p: at for (_, p), at in {**reading.reached, **again.reached}.items()}

    def _listed(self, records: Iterable[Read], run_id: str | None, wanted: set[str] | None) -> Iterator[Observed]:
        for record in records:
            kept = readable(record, "observations")
            seen = self._observed(kept, run_id, wanted) if kept is not None else None
            if seen is not None:
                yield seen

    def _polled(
        self,
        consumer: Consumer,
        topic: str,
        starts: dict[int, int],
        run_id: str | None,
        wanted: set[str] | None,
        idle: float | None,
        timeout: float | None,
    ) -> Iterator[Observed]:
        """What is read of `topic` from `starts` on until nothing new arrived for `idle` seconds
        (None: on) or until `timeout` (None: on)."""
        stop_at = time.monotonic() + timeout if timeout is not None else float("inf")
        last = time.monotonic()

        def over() -> bool:
            return (idle is not None and time.monotonic() - last >= idle) or time.monotonic() >= stop_at

        if over():
            return
        for record in self._reading(consumer, topic, dict(starts)):
            if record is not None:
                last = time.monotonic()
                yield from self._listed([record], run_id, wanted)
            if over():
                return

    def _reading(self, consumer: Consumer, topic: str, positions: dict[int, int]) -> Iterator[Read | None]:
        """Each record `consumer` reads of `topic` from `positions` on, and None for each poll
        that found none; `positions` move past each record. A partition read past its end (its
        log started over: a broker that came back empty) is read again from its start, as Apache
        Kafka's consumer does unasked (topics/ends.py `PastEnd`)."""
        consumer.assign([TopicPartition(topic, p, at) for p, at in sorted(positions.items())])
        past = PastEnd(consumer)
        while True:
            msg = consumer.poll(0.2)
            if msg is None or msg.error():
                if msg is None:
                    past.rewind(topic, positions)
                yield None
                continue
            record = read(msg)
            positions[record.partition] = record.offset + 1
            yield record

    def latest_of(self, tenant_id: str, call_id: str, since_ms: int, within_s: float) -> Observed | None:
        """A call's final observation on its tenant's topic, else its latest interim one, looking
        only from `since_ms` (when the call was registered: the broker finds where that is, where
        it can) to each partition's end the broker tells, and for at most `within_s` seconds,
        however busy the topic: a bounded scan."""
        consumer = self._consumer(eof=True)
        topic = self.topics.name("observations", tenant_id)
        stop_at = time.monotonic() + within_s
        latest: Observed | None = None
        try:
            asked = [TopicPartition(topic, p, since_ms) for p in self._partitions(consumer, topic)]
            found = consumer.offsets_for_times(asked, timeout=min(within_s, 5.0))
            # -1: nothing at or after that time in the partition; an error: read it from its start.
            starts = {(topic, tp.partition): OFFSET_BEGINNING if tp.error is not None else tp.offset for tp in found}
            reading = ToEnd(consumer, {k: at for k, at in starts.items() if at != -1}, stop_at - time.monotonic())
            for seen in self._listed(reading, None, {call_id}):
                latest = seen
                if seen.is_final:
                    return seen
        finally:
            consumer.close()
        return latest

    def _starts(self, consumer: Consumer, topic: str, start_offsets: Sequence[tuple[int, int]]) -> dict[int, int]:
        """Where to read each partition of a tenant's observation topic from: `start_offsets`,
        else its start. An offset past the end, as after a broker that came back empty, is read
        from the start: Apache Kafka's consumer resets it (`earliest`); on the embedded Tansu the
        readers do (`_to_ends`, `_reading`, and the feed: topics/ends.py)."""
        given = dict(start_offsets)
        return {p: given.get(p, OFFSET_BEGINNING) for p in self._partitions(consumer, topic)}

    def _observed(self, record: Consumed, run_id: str | None, wanted: set[str] | None) -> Observed | None:
        """The observation a record carries, if it is toolgate's and one that was asked for."""
        key = (record.key or b"").decode("utf-8", "replace")
        cid = header(record.headers, CALL_ID) or ""
        if (run_id and key != run_id) or (wanted is not None and cid not in wanted) or not self.genuine(record):
            return None
        try:
            observation = codec().decode(record.value or b"", Observation)
        except DecodeError:
            return None
        proposal_digest = header(record.headers, PROPOSAL_DIGEST) or ""
        return Observed(key, cid, observation, record.partition, record.offset, time.time(), proposal_digest)
