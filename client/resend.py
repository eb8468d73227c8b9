"""When a client publishes a call again that has no final answer yet (toolgate.client)."""

from __future__ import annotations

import threading
import time

from toolgate.client.calls import Observed, Proposed

# Re-publishing a call that has no final answer yet: first after RESEND_FIRST_S, then twice as
# long each time up to RESEND_MAX_S; a held call (its interim answer came) only every
# RESEND_MAX_S. Never past the call's deadline, nor past the end of its signature's window, less
# a margin (`calls.resend_window_s`): toolgate refuses a signature older than its proposal window
# (TOOLGATE_PROPOSAL_MAX_AGE_SECONDS, 900 s by default) as stale, and a copy that arrives stale
# is never answered (validation drops it), so a client that re-published past the window would
# only wait longer.
RESEND_FIRST_S = 10.0
RESEND_MAX_S = 60.0
PRUNE_FIRST = 1024  # waiting calls at which the client first looks for calls past their window


class Unanswered:
    """The calls a client proposed that have no final answer yet, each with when it is due to
    be re-published: RESEND_FIRST_S after it was sent, then twice as long each time up to
    RESEND_MAX_S; only every RESEND_MAX_S once toolgate said it holds the call for approval.
    A call leaves when its final answer is heard, or once past `resend_until_ms` (never
    re-published past its deadline or its signature's window)."""

    def __init__(self) -> None:
        self._calls: dict[str, tuple[Proposed, float, float]] = {}  # call_id -> (proposed, due at, interval)
        self._lock = threading.Lock()  # observation feeds tell it what they hear on their threads
        self._prune_at = PRUNE_FIRST

    def add(self, proposed: Proposed, now: float) -> None:
        if proposed.record is None:
            return
        with self._lock:
            self._add(proposed, now)

    def _add(self, proposed: Proposed, now: float) -> None:
        self._calls[proposed.call_id] = (proposed, now + RESEND_FIRST_S, RESEND_FIRST_S)
        if len(self._calls) >= self._prune_at:  # calls nobody waits for do not pile up
            wall_ms = time.time() * 1000
            for call_id in [c for c, (p, _, _) in self._calls.items() if wall_ms >= p.resend_until_ms()]:
                del self._calls[call_id]
            # The next look once as many calls again are waiting: a look costs each add O(1), not
            # a pass over every waiting call per 1,024 adds (at 100,000 calls in flight, 5 million).
            self._prune_at = max(PRUNE_FIRST, 2 * len(self._calls))

    def __contains__(self, call_id: object) -> bool:
        return call_id in self._calls

    def due(self, call_id: str, now: float) -> bool:
        entry = self._calls.get(call_id)
        return entry is not None and entry[1] <= now

    def heard(self, seen: Observed, now: float) -> None:
        with self._lock:
            self._heard(seen, now)

    def _heard(self, seen: Observed, now: float) -> None:
        entry = self._calls.get(seen.call_id)
        if entry is None or seen.proposal_digest != entry[0].proposal_digest:
            return
        if seen.is_final:
            del self._calls[seen.call_id]
        else:
            self._calls[seen.call_id] = (entry[0], max(entry[1], now + RESEND_MAX_S), RESEND_MAX_S)

    def take_due(self, now: float) -> list[Proposed]:
        """The calls due now, rescheduled; calls past their window are forgotten."""
        wall_ms = time.time() * 1000
        due = []
        with self._lock:
            for call_id, (proposed, at, interval) in list(self._calls.items()):
                if wall_ms >= proposed.resend_until_ms():
                    del self._calls[call_id]
                elif at <= now:
                    due.append(proposed)
                    longer = min(interval * 2, RESEND_MAX_S)
                    self._calls[call_id] = (proposed, now + longer, longer)
        return due
