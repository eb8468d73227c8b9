"""Reconciliation's decision: every row of the table in workers/reconciliation/decision.py."""

from __future__ import annotations

import pytest

from toolgate.schemas.models import TaxonomyClass
from toolgate.workers.execution.effects import Done, Effect, Unknown, failed
from toolgate.workers.reconciliation.decision import (
    NO_EFFECT,
    NOT_RECEIVED,
    PROVIDER_COMPLETED,
    PROVIDER_FAILED,
    UNVERIFIABLE,
    Ask,
    Complete,
    FailFinal,
    Leave,
    PendingKey,
    Redrive,
    Resolution,
    resolve,
    triage,
)

CREATED = 1_000_000
WINDOW = 8_000
OPEN = CREATED + WINDOW - 1  # the last millisecond the verification window is open
CLOSED = CREATED + WINDOW
# What the status query answers when the provider never received the call, and when it failed.
NEVER_RECEIVED = failed(TaxonomyClass.DEPENDENCY_UNAVAILABLE, "not_received", "never received", final=False)
PROVIDER_FAILURE = failed(TaxonomyClass.DEPENDENCY_UNAVAILABLE, "provider_failed", "it failed", final=True)


def key(executor: str, status_query: bool = False) -> PendingKey:
    return PendingKey(executor=executor, status_query=status_query, created_ms=CREATED)


@pytest.mark.parametrize(
    ("executor", "status_query", "expected"),
    [
        ("postgres", False, Redrive(NO_EFFECT)),
        ("postgres", True, Redrive(NO_EFFECT)),
        ("http", True, Ask()),
        ("http", False, FailFinal(UNVERIFIABLE)),
        ("python", False, FailFinal(UNVERIFIABLE)),
        ("python", True, FailFinal(UNVERIFIABLE)),
    ],
)
def test_triage(executor: str, status_query: bool, expected: Ask | Resolution) -> None:
    assert triage(key(executor, status_query)) == expected


@pytest.mark.parametrize(
    ("answer", "now_ms", "expected"),
    [
        (Done({"id": "ch_1"}), OPEN, Complete({"id": "ch_1"})),
        (Done({"id": "ch_1"}), CLOSED, Complete({"id": "ch_1"})),
        (NEVER_RECEIVED, OPEN, Redrive(NOT_RECEIVED)),
        (NEVER_RECEIVED, CLOSED, Redrive(NOT_RECEIVED)),
        (PROVIDER_FAILURE, OPEN, FailFinal(PROVIDER_FAILED)),
        (PROVIDER_FAILURE, CLOSED, FailFinal(PROVIDER_FAILED)),
        (Unknown("status query answered 503"), OPEN, Leave("still unknown: status query answered 503")),
        (Unknown("status query answered 503"), CLOSED, FailFinal(UNVERIFIABLE)),
    ],
)
def test_resolve(answer: Effect, now_ms: int, expected: Resolution) -> None:
    assert resolve(key("http", True), answer, now_ms=now_ms, window_ms=WINDOW) == expected


@pytest.mark.parametrize(
    ("resolution", "action"),
    [
        (Redrive(NO_EFFECT), "redriven"),
        (Complete({}), "completed"),
        (FailFinal(UNVERIFIABLE), "failed_final"),
        (Leave("still unknown"), "unresolved"),
    ],
)
def test_each_resolution_names_its_audit_action(resolution: Resolution, action: str) -> None:
    assert resolution.action == action


def test_a_completion_says_the_provider_reported_it() -> None:
    assert Complete({}).detail == PROVIDER_COMPLETED


def test_a_final_failure_tells_the_agent_not_to_retry() -> None:
    message = FailFinal(PROVIDER_FAILED).message
    assert message.startswith(PROVIDER_FAILED + "; ")
    assert "operator must verify" in message and message.endswith("Do not retry.")
