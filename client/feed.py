"""One long-lived reader of a tenant's observation topic, for every call a client waits for.

A `ToolgateClient` that proposes with `watch` opens one `ObservationFeed` per tenant topic, the
first time, and keeps it. The feed is assigned from where the topic ended when it opened, so
it sees the answer of every call proposed after that however fast it comes. A thread polls it
and hands each observation of a call the client watches to that call's mailbox, where `wait`
finds it; `heard` is told of every one (the client's resend schedule).

Fetching costs the broker only while someone waits: with no waiter, the feed's consumer gives
up its partitions, and takes them back from where it stopped when a call waits again, and
while calls wait it fetches with a wait of a few milliseconds, since the broker does not answer
a fetch early when records arrive.

A feed holds at most MAX_WATCHED calls (the oldest are forgotten first) and forgets a call once
its final answer was taken; `wait` reads the topic on its own for a call the feed does not hold.

A partition read from past its end (its log started over: the embedded broker came back empty) is
read again from its start, so the answers to calls sent again since are heard.

Anyone who may write the topic may write anything to it: a record is read through the guarded
reader (topics/consumed.py), one that cannot be read is skipped with a warning, and nothing a
record holds ends the feed's thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

from confluent_kafka import Consumer, TopicPartition

from toolgate.topics.consumed import Consumed, Unreadable, read, skipped
from toolgate.topics.ends import PastEnd
from toolgate.topics.headers import CALL_ID, header

log = logging.getLogger("toolgate.client")
MAX_WATCHED = 10_000
FETCH_WAIT_MS = 5
POLL_S = 0.05

T = TypeVar("T")


class ObservationFeed(Generic[T]):
    """The observations of the calls a client watches on one topic, read by one consumer and
    kept in one mailbox per call until taken."""

    def __init__(
        self,
        consumer: Consumer,
        topic: str,
        start: dict[int, int],
        read: Callable[[Consumed], T | None],
        also_read: Callable[[str], bool] = lambda call_id: False,
    ) -> None:
        """`consumer`: a fresh consumer (fetch wait FETCH_WAIT_MS); `start`: partition -> first
        offset; `read`: what a record of a watched call holds (None: nothing to keep), called
        on the feed's thread, also for the calls `also_read` names (what it holds is not kept)."""
        self._consumer = consumer
        self._topic = topic
        self.positions = dict(start)  # partition -> the next offset the feed reads
        self._read = read
        self._also_read = also_read
        self._mailboxes: dict[str, list[T]] = {}  # watched call_id -> what was heard, in order
        self._waiters = 0
        self._closed = False
        self._unassigned = False
        self._changed = threading.Condition()
        self._past = PastEnd(consumer)
        consumer.assign([TopicPartition(topic, p, o) for p, o in sorted(start.items())])
        self._thread = threading.Thread(target=self._run, name=f"toolgate-observer-{topic}", daemon=True)
        self._thread.start()

    def watch(self, call_id: str) -> None:
        """Keep what is heard of this call from now on (the oldest call beyond MAX_WATCHED is
        forgotten)."""
        with self._changed:
            self._mailboxes.setdefault(call_id, [])
            while len(self._mailboxes) > MAX_WATCHED:
                del self._mailboxes[next(iter(self._mailboxes))]

    def watches(self, call_id: str) -> bool:
        with self._changed:
            return call_id in self._mailboxes

    def forget(self, call_id: str) -> None:
        with self._changed:
            self._mailboxes.pop(call_id, None)

    def take(self, call_id: str, wanted: Callable[[T], bool], timeout: float) -> T | None:
        """The first thing heard of `call_id` that is `wanted`, waiting up to `timeout` seconds
        for it; None if none came (or the call is not watched). It stays in the mailbox, so a
        second `take` finds it again, as a second read of the topic would; `forget` empties it."""
        until = time.monotonic() + timeout
        with self._changed:
            self._waiters += 1
            self._changed.notify_all()
            try:
                while (box := self._mailboxes.get(call_id)) is not None:
                    for item in box:
                        if wanted(item):
                            return item
                    left = until - time.monotonic()
                    if left <= 0:
                        break
                    self._changed.wait(left)
                return None
            finally:
                self._waiters -= 1

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        self._thread.join(5)

    def _resume(self) -> bool:
        """Wait, unassigned, until someone waits, then read on from where the feed was; False
        once closed. (Unassigning and assigning at explicit offsets, not pausing: a resumed
        partition may go on from its fetch position, past records fetched before it paused.)"""
        with self._changed:
            while self._waiters == 0 and not self._closed:
                if not self._unassigned:
                    self._consumer.unassign()
                    self._unassigned = True
                self._changed.wait(1.0)
            if self._closed:
                return False
        if self._unassigned:
            self._consumer.assign([TopicPartition(self._topic, p, o) for p, o in sorted(self.positions.items())])
            self._unassigned = False
        return True

    def _run(self) -> None:
        try:
            while self._resume():
                msg = self._consumer.poll(POLL_S)
                if msg is None:  # nothing more: unless its log started over under it
                    self._past.rewind(self._topic, self.positions)
                    continue
                if msg.error():
                    continue
                record = read(msg)
                self.positions[record.partition] = record.offset + 1
                if isinstance(record, Unreadable):
                    skipped(log, record, "observation feed")
                    continue
                try:
                    self._keep(record)
                except Exception as exc:  # anyone who can write to the topic wrote this record
                    log.warning(
                        "unreadable observation record",
                        extra={"action": "skip_unreadable", "offset": record.offset, "error": repr(exc)[:200]},
                    )
        finally:
            self._consumer.close()

    def _keep(self, record: Consumed) -> None:
        """Hand what a record holds to the mailbox of its call, if the call is watched."""
        call_id = header(record.headers, CALL_ID) or ""
        if not self.watches(call_id) and not self._also_read(call_id):
            return
        item = self._read(record)
        if item is None:
            return
        with self._changed:
            box = self._mailboxes.get(call_id)
            if box is not None:
                box.append(item)
                self._changed.notify_all()
