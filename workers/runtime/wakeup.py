"""Napping stages woken through Postgres when a record comes for them.

A napping stage finds a record at its next look, up to a nap after it came, at every hop. So a
stage that delivers a record to a partition that had none for QUIET_S says so, once the broker
acknowledged it, with a NOTIFY on CHANNEL naming the topic; a napping stage that reads that topic
LISTENs, and looks at once. Such a stage naps for seconds (settings `woken_nap_ms`), on either
broker (`woken`):

* on Tansu, whose fetch does not answer a waiting consumer early, every stage naps (settings
  `idle_nap_ms`); those whose every input is announced (policy, approval-wait, execution,
  normalization: ANNOUNCED) are woken, and only validation, fed by agents, keeps naps short
  enough to answer in time;
* on Apache Kafka, where a stage could long-poll, one that waits in confluent-kafka's poll still
  wakes five times a second (the poll waits in 200 ms slices): the stages that only stages feed
  (policy, execution, normalization: STAGE_WRITTEN) nap woken instead, waiting on an event of
  their own. Validation and approval-wait (whose decisions come from approval services that may
  not announce them) long-poll.

A notice is a hint to look, never a record: a stage believes only what it fetches. One lost
(Postgres away, a connection dropped) costs at most one nap's wait, and anyone who may NOTIFY
can only make a stage look.
"""

from __future__ import annotations

import logging
import queue
import select
import threading
import time
from collections.abc import Callable, Collection

import psycopg

from toolgate.settings import Settings
from toolgate.store import server

log = logging.getLogger("toolgate.worker")

CHANNEL = "toolgate_records"
# The topics whose records are announced (logical names): those only stages write, and the
# approvals' decisions, announced by `toolgate approvals` (an approval service that does not
# announce its decisions has them taken at approval-wait's next look). A stage that reads only
# these is woken.
ANNOUNCED = frozenset({"validated", "authorized", "executable", "results", "approvals_decisions"})
# Those only stages write: a stage that reads only these is woken on any broker; approval-wait,
# which also reads decisions an approval service may not announce, only where every stage naps.
STAGE_WRITTEN = ANNOUNCED - {"approvals_decisions"}
QUIET_S = 1.0  # a partition that had a record this recently is read by an awake stage
RETRY_S = 2.0  # how long a listener waits to connect again after Postgres went away
CONNECT_S = 5


class Announcer:
    """Says on CHANNEL which topics got a record after a quiet spell. `delivered` is called in a
    producer's report thread and never blocks: the notices go out from a thread of its own."""

    def __init__(self, database_url: str) -> None:
        self._url = database_url
        self._last: dict[tuple[str, int], float] = {}
        self._pending: queue.SimpleQueue[str] = queue.SimpleQueue()
        threading.Thread(target=self._run, name="announcer", daemon=True).start()

    def delivered(self, topic: str, partition: int) -> None:
        """A record of `topic` was acknowledged on `partition`."""
        now = time.monotonic()
        last = self._last.get((topic, partition))
        self._last[(topic, partition)] = now
        if last is None or now - last >= QUIET_S:
            self._pending.put(topic)

    def _run(self) -> None:
        conn: psycopg.Connection[tuple[object, ...]] | None = None
        while True:
            topics = {self._pending.get()}
            while not self._pending.empty():
                topics.add(self._pending.get())
            try:
                if conn is None or conn.closed:
                    conn = psycopg.connect(self._url, autocommit=True, connect_timeout=CONNECT_S)
                for topic in sorted(topics):
                    _notify(conn, topic)
            except psycopg.Error as exc:  # the stages it would have woken look after their nap
                log.debug("no notice", extra={"action": "announce_failed", "error": str(exc)})
                conn = None


class Listener:
    """Calls `wake` when a notice on CHANNEL names one of `topics`, from a thread of its own that
    waits on its Postgres connection (no wake-up while nothing comes)."""

    def __init__(self, database_url: str, topics: Collection[str], wake: Callable[[], None]) -> None:
        self._url = database_url
        self._topics = frozenset(topics)
        self._wake = wake
        threading.Thread(target=self._run, name="listener", daemon=True).start()

    def _run(self) -> None:
        while True:
            try:
                with psycopg.connect(self._url, autocommit=True, connect_timeout=CONNECT_S) as conn:
                    server.listen(conn, CHANNEL)
                    self._wake()  # what came while it was not listening is looked for now
                    self._serve(conn)
            except (psycopg.Error, OSError) as exc:
                log.debug("not listening", extra={"action": "listen_failed", "error": str(exc)})
            time.sleep(RETRY_S)

    def _serve(self, conn: psycopg.Connection[tuple[object, ...]]) -> None:
        """Wait on the connection's socket, and read the notices when the server sends any.
        (psycopg's `notifies()` waits in slices of 0.1 s: ten wake-ups a second for nothing.)"""
        pgconn = conn.pgconn
        while True:
            select.select([pgconn.socket], [], [])
            pgconn.consume_input()  # raises once the server is gone
            while (notice := pgconn.notifies()) is not None:
                if notice.extra.decode(errors="replace") in self._topics:
                    self._wake()


def announce(database_url: str, topic: str) -> None:
    """Say once, now, that `topic` got a record (a client of toolgate's own that holds a Postgres
    login: `toolgate approvals approve`). A notice that cannot be sent costs only a nap's wait."""
    try:
        with psycopg.connect(database_url, autocommit=True, connect_timeout=CONNECT_S) as conn:
            _notify(conn, topic)
    except psycopg.Error as exc:
        log.debug("no notice", extra={"action": "announce_failed", "error": str(exc)})


def _notify(conn: psycopg.Connection[tuple[object, ...]], topic: str) -> None:
    server.notify(conn, CHANNEL, topic)


def naps(settings: Settings) -> bool:
    """Whether any stage of this deployment naps (and so must be told of records)."""
    return settings.idle_nap_ms > 0 or settings.woken_nap_ms > 0


def woken(settings: Settings, sources: Collection[str]) -> bool:
    """Whether a stage reading `sources` (logical names) naps woken through Postgres."""
    if settings.idle_nap_ms > 0:
        return set(sources) <= ANNOUNCED
    return settings.woken_nap_ms > 0 and set(sources) <= STAGE_WRITTEN


def announcer(settings: Settings) -> Announcer | None:
    """An Announcer where stages nap; none is needed elsewhere."""
    return Announcer(settings.database_url) if naps(settings) else None
