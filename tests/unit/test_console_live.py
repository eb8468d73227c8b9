"""The console's live notices (console/live.py): a batch of changed tickets is told to each open
stream whose approver may see them, and to no other."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from toolgate.console.live import Live


def told(queue: asyncio.Queue[str]) -> list[str]:
    said = []
    while not queue.empty():
        said.append(queue.get_nowait())
    return said


def test_each_changed_ticket_is_told_only_to_the_streams_of_approvers_who_may_see_it() -> None:
    live = Live("", cast(Any, None))
    alice_inbox, alice_card, bob = asyncio.Queue[str](), asyncio.Queue[str](), asyncio.Queue[str]()
    live.streams.update({alice_inbox: "alice", alice_card: "alice", bob: "bob"})
    live.tell({("appr_3", "alice"), ("appr_2", "bob"), ("appr_1", "alice"), ("appr_4", "carol")})
    assert told(alice_inbox) == told(alice_card) == ["appr_1", "appr_3"]
    assert told(bob) == ["appr_2"]


def test_tickets_heard_before_they_are_told_are_told_once() -> None:
    live = Live("", cast(Any, None))
    live.heard(["appr_1", "appr_2"])
    live.heard(["appr_2"])
    assert live.changed == {"appr_1", "appr_2"} and live.woken.is_set()
