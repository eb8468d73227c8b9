"""The client's re-publishing schedule (client/resend.py, Unanswered): when a call with no
final answer is sent again, and when it stops being."""

from __future__ import annotations

import time

from toolgate.client import Observed, Proposed
from toolgate.client.calls import resend_window_s
from toolgate.client.resend import PRUNE_FIRST, RESEND_FIRST_S, RESEND_MAX_S, Unanswered
from toolgate.schemas.models import Observation
from toolgate.topics.producers import Record

from .factories import sample_models


def _proposed(call_id: str, *, deadline_ms: int | None = None, created_at_ms: int | None = None) -> Proposed:
    created = int(time.time() * 1000) if created_at_ms is None else created_at_ms
    record = Record("tool.proposals", b"run", b"bytes", ())
    return Proposed(call_id, "run", "tp", created, (), "acme", f"digest-{call_id}", record, deadline_ms)


def _observed(call_id: str, code: int, digest: str | None = None) -> Observed:
    observation: Observation = sample_models()[Observation]
    observation = observation.model_copy(update={"status": observation.status.model_copy(update={"code": code})})
    return Observed("run", call_id, observation, 0, 0, 0.0, digest or f"digest-{call_id}")


def test_a_call_is_due_after_the_first_interval_then_backs_off_to_the_cap() -> None:
    calls = Unanswered()
    calls.add(_proposed("a"), now=0.0)
    assert not calls.due("a", RESEND_FIRST_S - 0.1)
    sent_at, at = [], 0.0
    while len(sent_at) < 6:
        at += 0.5
        if calls.due("a", at):
            [_] = calls.take_due(at)
            sent_at.append(at)
    gaps = [round(b - a) for a, b in zip([0.0, *sent_at], sent_at, strict=False)]
    assert gaps == [RESEND_FIRST_S, 2 * RESEND_FIRST_S, 4 * RESEND_FIRST_S, RESEND_MAX_S, RESEND_MAX_S, RESEND_MAX_S]


def test_a_due_call_brings_every_other_due_call_along_and_none_that_is_not() -> None:
    calls = Unanswered()
    calls.add(_proposed("early"), now=0.0)
    calls.add(_proposed("also"), now=1.0)
    calls.add(_proposed("late"), now=RESEND_FIRST_S)
    assert sorted(p.call_id for p in calls.take_due(RESEND_FIRST_S + 1.0)) == ["also", "early"]


def test_a_final_answer_ends_a_call_and_an_interim_one_slows_it_to_the_cap() -> None:
    calls = Unanswered()
    calls.add(_proposed("done"), now=0.0)
    calls.add(_proposed("held"), now=0.0)
    calls.heard(_observed("done", 200), now=1.0)
    calls.heard(_observed("held", 202), now=1.0)
    assert "done" not in calls and "held" in calls
    assert not calls.due("held", RESEND_FIRST_S)
    assert calls.due("held", 1.0 + RESEND_MAX_S)


def test_an_answer_to_another_proposal_under_the_same_call_id_is_not_this_calls_answer() -> None:
    calls = Unanswered()
    calls.add(_proposed("a"), now=0.0)
    calls.heard(_observed("a", 200, digest="someone-else"), now=1.0)
    assert "a" in calls


def test_no_call_is_sent_again_past_its_deadline_or_its_signatures_window() -> None:
    now_ms = int(time.time() * 1000)
    calls = Unanswered()
    calls.add(_proposed("past-deadline", deadline_ms=now_ms - 1), now=0.0)
    calls.add(_proposed("old-signature", created_at_ms=now_ms - 900_000), now=0.0)
    calls.add(_proposed("fine", deadline_ms=now_ms + 600_000), now=0.0)
    assert [p.call_id for p in calls.take_due(RESEND_FIRST_S)] == ["fine"]
    assert "past-deadline" not in calls and "old-signature" not in calls


def test_a_call_not_proposed_by_this_client_is_not_tracked() -> None:
    calls = Unanswered()
    proposed = _proposed("raw")
    calls.add(Proposed(proposed.call_id, "run", "tp", proposed.created_at_ms), now=0.0)
    assert "raw" not in calls


def test_calls_past_their_window_are_forgotten_and_the_look_for_them_stays_rare() -> None:
    calls = Unanswered()
    past = int(time.time() * 1000) - 3_600_000  # created an hour ago: past its signature's window
    for n in range(PRUNE_FIRST - 1):
        calls.add(_proposed(f"old{n}", created_at_ms=past), now=0.0)
    assert f"old{PRUNE_FIRST - 2}" in calls
    calls.add(_proposed("new0"), now=0.0)  # the 1,024th: the look, which forgets all but this one
    assert "old0" not in calls and "new0" in calls
    for n in range(1, 3 * PRUNE_FIRST):  # live calls: nothing to forget, and no look per 1,024 adds
        calls.add(_proposed(f"new{n}"), now=0.0)
    assert all(f"new{n}" in calls for n in range(3 * PRUNE_FIRST))
    assert calls._prune_at == 4 * PRUNE_FIRST


def test_re_publishing_stops_before_the_deployments_proposal_window_closes() -> None:
    assert resend_window_s(900.0) == 840.0  # the default window, less a minute
    assert resend_window_s(60.0) == 45.0  # a tightened window keeps a quarter as margin
    within = int(resend_window_s(60.0) * 1000)
    wall = int(time.time() * 1000)
    record = Record("tool.proposals", b"run", b"bytes", ())
    inside = Proposed("in", "run", "tp", wall - 40_000, record=record, resend_within_ms=within)
    past = Proposed("past", "run", "tp", wall - 46_000, record=record, resend_within_ms=within)
    assert inside.resend_until_ms() == wall - 40_000 + 45_000
    calls = Unanswered()
    calls.add(inside, now=0.0)
    calls.add(past, now=0.0)
    assert calls.take_due(RESEND_FIRST_S) == [inside]
