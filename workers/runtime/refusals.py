"""Refusals of records that prove nobody, collapsed into counts in the audit log.

Anyone who may write a topic can send records no one signed: bytes that decode as nothing,
proposals without a valid signature, batches without a stage MAC, records whose headers cannot
be read, decisions no registered approver signed. Each is still dead-lettered with its bytes
(the per-record trail), but the audit log, which is never pruned and whose every append is
signed, gets a bounded number of rows for them, whatever their number:

    per (stage, audit action, refusal code, source topic), per window of `interval_ms`
    (opened by the first such refusal):
    the first INDIVIDUALLY refusals    one row each, written at once, as they would be alone
    every later one in the window      counted; when the window closes, one row
                                       `refusals_collapsed` with the count, when the window
                                       opened and last saw one, and the first SAMPLES of them

So a flood writes at most INDIVIDUALLY + 1 rows per key and window, and the keys are few: a
stage, its actions and its refusal codes are toolgate's own constants, and a stage reads a
handful of topics. What is collapsed (`Refusal`): the validation door's Drops (no proven
signature; beyond the size limits and naming no call), undecodable proposals, records on an
internal topic whose stage MAC does not verify, records whose headers cannot be read, and
approval decisions no registered approver's signature was checked for (unknown approval,
unknown or inactive approver, bad signature, a decision id already used); and what anyone who
captured genuine records can send again, which proves no one sent it now: a round's stale
records (intake.py, freshness.py) and dropped copies of calls already bound (a proposal replayed
past its window; validation/admitting.py). What is not: every other refusal of a caller whose
signature (or stage MAC) was proven, who is accountable: one row each, as ever, written by the
handler in its own transaction.

Every value in a collapsed refusal's entry is bounded before it gets here (audit_entry.bounded).
Pure: the time comes in (wall-clock ms, for the rows it writes); the runtime writes the
entries (rounds.py, app.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from toolgate.store.audit_entry import Entry

INDIVIDUALLY = 10  # refusals of one key audited one row each per window
SAMPLES = 5  # refusals of one key a collapsed row shows, beyond those
COLLAPSED = "refusals_collapsed"

Key = tuple[str, str, str, str]  # stage, action, code, source topic


@dataclass(frozen=True)
class Refusal:
    """A record refused that proves nobody: the entry it would be audited with alone (every value
    in it bounded) and the logical topic it came from."""

    entry: Entry
    source: str

    @property
    def key(self) -> Key:
        e = self.entry
        return e.stage, e.action, str(e.detail.get("code", "")), self.source


@dataclass
class _Window:
    opened_ms: int
    last_ms: int
    seen: int = 0
    samples: list[dict[str, Any]] = field(default_factory=list)


class Tally:
    """The open windows of one stage process's unproven refusals."""

    def __init__(self, interval_ms: int, individually: int = INDIVIDUALLY, samples: int = SAMPLES) -> None:
        self.interval_ms = interval_ms
        self.individually = individually
        self.samples = samples
        self._windows: dict[Key, _Window] = {}

    def admit(self, refusals: list[Refusal], now_ms: int) -> list[Entry]:
        """What to audit now for these refusals (and for every window that closed by now)."""
        out = self.due(now_ms)
        for refusal in refusals:
            window = self._windows.get(refusal.key)
            if window is None:
                window = self._windows[refusal.key] = _Window(now_ms, now_ms)
            window.seen += 1
            window.last_ms = now_ms
            if window.seen <= self.individually:
                out.append(refusal.entry)
            elif len(window.samples) < self.samples:
                window.samples.append(_sample(refusal.entry))
        return out

    def due(self, now_ms: int) -> list[Entry]:
        """The rows of the windows that closed by `now_ms` (each window is then forgotten)."""
        closed = [key for key, w in self._windows.items() if now_ms - w.opened_ms >= self.interval_ms]
        return self._close(closed)

    def drain(self) -> list[Entry]:
        """The rows of every open window, closed now (the stage stops)."""
        return self._close(list(self._windows))

    def open_windows(self) -> int:
        return len(self._windows)

    def _close(self, keys: list[Key]) -> list[Entry]:
        out = []
        for key in keys:
            window = self._windows.pop(key)
            if window.seen > self.individually:
                out.append(self._collapsed(key, window))
        return out

    def _collapsed(self, key: Key, window: _Window) -> Entry:
        stage, action, code, source = key
        detail = {
            "action": action,
            "code": code,
            "source": source,
            "seen": window.seen,
            "audited_individually": self.individually,
            "collapsed": window.seen - self.individually,
            "first_at_ms": window.opened_ms,
            "last_at_ms": window.last_ms,
            "window_ms": self.interval_ms,
            "samples": window.samples,
            "proven": False,
        }
        return Entry(stage, COLLAPSED, "toolgate", None, None, detail)


def _sample(entry: Entry) -> dict[str, Any]:
    """One refusal as a collapsed row shows it: its bounded entry's fields."""
    return {"actor": entry.actor, "call_id": entry.call_id, "tenant_id": entry.tenant_id, **entry.detail}
