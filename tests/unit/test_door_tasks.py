"""Held calls as MCP tasks: the shapes (door/tasks.py), one row of its table each."""

from __future__ import annotations

from typing import Any

from toolgate.door import results, tasks

STATE = results.ApprovalState("appr_1", "PENDING", 2, 1, ("finance-controllers",), 1_700_000_060_000)
CREATED, UPDATED = 1_700_000_000_000, 1_700_000_030_000


def observation(code: int = 200, errors: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    is_error = bool(errors)
    return {
        "tool_identity": {"name": "payment.charge_card", "version": "1.0.0", "call_id": "call_1"},
        "status": {
            "code": code,
            "taxonomy_class": "CONFIRMATION_MISSING" if is_error else "SUCCESS",
            "is_error": is_error,
            "repairable": False,
            "retryable": False,
        },
        "result_payload": {"data": {"status": "succeeded"}, "errors": errors or []},
        "execution_metadata": {"idempotency_hit": False},
    }


WITHDRAWN = [{"field": "approval", "code": "approval_withdrawn", "message": "the requesting agent cli withdrew it"}]


def test_only_a_request_that_declares_the_extension_takes_tasks() -> None:
    assert tasks.declared({tasks.CAPABILITIES: {"extensions": {tasks.EXTENSION: {}}}})
    assert not tasks.declared({tasks.CAPABILITIES: {"extensions": {"io.modelcontextprotocol/ui": {}}}})
    assert not tasks.declared({tasks.CAPABILITIES: {}}) and not tasks.declared(None)
    assert not tasks.declared({"capabilities": {"extensions": {tasks.EXTENSION: {}}}})


def test_a_held_call_is_created_as_a_working_task_named_by_its_call_id() -> None:
    made = tasks.created("call_1", STATE, CREATED, UPDATED)
    assert (made["resultType"], made["taskId"], made["status"]) == ("task", "call_1", "working")
    assert "1 of 2 approvals, from finance-controllers" in made["statusMessage"]
    assert (made["ttlMs"], made["pollIntervalMs"]) == (None, tasks.POLL_INTERVAL_MS)
    assert made["createdAt"] == "2023-11-14T22:13:20.000Z" and made["lastUpdatedAt"] == "2023-11-14T22:13:50.000Z"
    assert "result" not in made
    approval = made["_meta"][tasks.APPROVAL_META]
    assert approval == {
        "approval_id": "appr_1",
        "status": "PENDING",
        "approvals": 1,
        "required_approvals": 2,
        "approver_groups": ["finance-controllers"],
        "expires_at": "2023-11-14T22:14:20.000Z",
    }


def test_a_task_is_working_until_its_final_observation() -> None:
    assert tasks.status_of(None) == "working"
    assert tasks.status_of(observation(202)) == "working"
    assert tasks.status_of(observation()) == "completed"
    assert tasks.status_of(observation(403, [{"code": "approval_denied"}])) == "completed"
    assert tasks.status_of(observation(403, WITHDRAWN)) == "cancelled"


def test_a_completed_task_inlines_its_result_on_2026_and_not_on_2025() -> None:
    final = results.observed(observation())
    modern = tasks.detailed("call_1", STATE, final, CREATED, UPDATED, modern=True)
    assert modern["status"] == "completed" and modern["result"]["structuredContent"]["status"]["code"] == 200
    assert modern["result"]["isError"] is False and "ttlMs" in modern
    legacy = tasks.detailed("call_1", STATE, final, CREATED, UPDATED, modern=False)
    assert legacy["status"] == "completed" and "result" not in legacy
    assert (legacy["ttl"], legacy["pollInterval"]) == (None, tasks.POLL_INTERVAL_MS)


def test_a_withdrawn_call_is_a_cancelled_task_that_says_so() -> None:
    final = results.observed(observation(403, WITHDRAWN))
    task = tasks.detailed("call_1", STATE, final, CREATED, UPDATED, modern=True)
    assert task["status"] == "cancelled" and "result" not in task
    assert "approval_withdrawn" in task["statusMessage"]


def test_a_decided_call_still_without_its_observation_is_working() -> None:
    approved = results.ApprovalState("appr_1", "APPROVED", 2, 2, (), 1_700_000_060_000)
    task = tasks.detailed("call_1", approved, None, CREATED, UPDATED, modern=True)
    assert task["status"] == "working" and "approved (2 of 2) and runs" in task["statusMessage"]
    denied = results.ApprovalState("appr_1", "DENIED", 2, 0, (), 1_700_000_060_000)
    assert "is DENIED" in tasks.detailed("call_1", denied, None, CREATED, UPDATED, modern=True)["statusMessage"]
