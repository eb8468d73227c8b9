"""The MCP front door's pure parts: contracts as MCP tools, calls as proposals, observations as results."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from tests.unit.factories import registry
from toolgate.door import calls, results, tools
from toolgate.schemas.hashing import CALLER_KEY
from toolgate.schemas.reference import observation_schema

SCHEMA = observation_schema()

# tool name -> (readOnlyHint, destructiveHint, idempotentHint, openWorldHint)
HINTS = {
    "invoice_fetch_v1": (True, False, True, False),
    "invoice_tax_estimate_v1": (True, False, True, False),
    "invoice_create_draft_v1": (False, False, True, False),
    "invoice_void_draft_v1": (False, False, False, False),
    "notify_send_email_v1": (False, True, False, True),
    "payment_charge_card_v1": (False, True, False, True),
}


def observation(
    taxonomy: str = "SUCCESS", data: Any = None, errors: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    error = taxonomy != "SUCCESS"
    return {
        "tool_identity": {"name": "invoice.fetch", "version": "1.0.0", "call_id": "call_1"},
        "execution_metadata": {
            "timestamp": "2026-11-23T08:00:00.000Z",
            "latency_ms": 12,
            "idempotency_hit": False,
            "trace_id": "t",
            "attempt_number": 1,
        },
        "status": {
            "code": 422 if error else 200,
            "is_error": error,
            "taxonomy_class": taxonomy,
            "retryable": False,
            "repairable": error,
            "requires_approval": False,
            "fail_closed": error,
        },
        "result_payload": {"data": data, "errors": errors or [], "warnings": []},
        "verification": {
            "post_action_verification_required": False,
            "target_state_reference": None,
            "expected_state": None,
            "delay_seconds": 0,
        },
    }


def test_every_current_contract_is_a_tool_with_hints_from_its_side_effect_class() -> None:
    listed = tools.contract_tools(registry(), SCHEMA)
    for name, (read_only, destructive, idempotent, open_world) in HINTS.items():
        tool, contract = listed[name]
        hints = tool.annotations
        assert hints is not None
        assert (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint, hints.open_world_hint) == (
            read_only,
            destructive,
            idempotent,
            open_world,
        ), name
        assert tool.input_schema == dict(contract.input_schema)
        assert tool.title and contract.version in tool.title
        assert tool.meta == {"toolgate/tool": contract.name, "toolgate/version": contract.version}


def test_a_deprecated_major_is_listed_and_says_so() -> None:
    tool, contract = tools.contract_tools(registry(), SCHEMA)["invoice_fetch_v0"]
    assert contract.lifecycle == "deprecated"
    assert tool.description is not None and tool.description.startswith("DEPRECATED")


def test_the_output_schema_is_the_observation_with_the_contracts_output_as_a_success() -> None:
    tool, contract = tools.contract_tools(registry(), SCHEMA)["invoice_fetch_v1"]
    assert tool.output_schema is not None
    check = Draft202012Validator(tool.output_schema)
    success = observation(data={"invoice_id": "inv_1"})
    assert list(check.iter_errors(success)) == []
    data = tool.output_schema["properties"]["result_payload"]["properties"]["data"]
    assert data["anyOf"][0]["properties"] == contract.output_schema["properties"]
    broken = copy.deepcopy(success)
    del broken["status"]
    assert list(check.iter_errors(broken)) != []


def test_the_door_tools_preview_any_contract_tool_and_ask_for_a_status() -> None:
    preview, status = tools.door_tools(["b_v1", "a_v1"], SCHEMA)
    assert (preview.name, status.name) == (tools.PREVIEW, tools.CALL_STATUS)
    assert preview.input_schema["properties"]["tool"]["enum"] == ["a_v1", "b_v1"]
    assert status.input_schema["required"] == ["call_id"]


@pytest.mark.parametrize(
    ("meta", "operation", "keyed"),
    [
        (None, None, False),
        ({}, None, False),
        ({"progressToken": 3}, None, False),
        ({calls.OPERATION_ID: "op-7"}, "op-7", True),
        ({calls.OPERATION_ID: "an id with spaces/and: symbols é"}, "an id with spaces/and: symbols é", True),
    ],
)
def test_an_operation_id_in_meta_makes_retries_one_operation(
    meta: dict[str, Any] | None, operation: str | None, keyed: bool
) -> None:
    plan = calls.plan("invoice.create_draft", "1.0.0", {"b": 1, "a": "x"}, meta, "cli")
    assert (plan.tool, plan.version, plan.arguments) == ("invoice.create_draft", "1.0.0", '{"b":1,"a":"x"}')
    assert plan.operation_id == operation
    assert (plan.idempotency_key is not None) == keyed
    if plan.idempotency_key is not None:
        assert CALLER_KEY.fullmatch(plan.idempotency_key)
        assert plan.idempotency_key == calls.plan("t", "1.0.0", {}, meta, "cli").idempotency_key  # any retry
        assert plan.idempotency_key != calls.plan("t", "1.0.0", {}, meta, "other-agent").idempotency_key


@pytest.mark.parametrize("bad", [7, "", "x" * 201, "line\nbreak", ["op"]])
def test_an_unusable_operation_id_is_refused(bad: Any) -> None:
    with pytest.raises(calls.BadMeta):
        calls.plan("t", "1.0.0", {}, {calls.OPERATION_ID: bad}, "cli")


@pytest.mark.parametrize(
    ("session", "meta", "process", "run"),
    [
        (None, None, "mcp-proc", "mcp-proc"),
        ("sess-1", None, "", calls.run_key("sess-1", None, "")),
        (None, {calls.RUN_ID: "run-9"}, "mcp-proc", "run-9"),
        ("sess-1", {calls.RUN_ID: "run-9"}, "", "run-9"),
        (None, None, "", None),
    ],
)
def test_one_run_per_session(session: str | None, meta: dict[str, Any] | None, process: str, run: str | None) -> None:
    assert calls.run_key(session, meta, process) == run
    if session:
        assert run is not None and session not in run and run != calls.run_key("sess-2", None, "")


@pytest.mark.parametrize(
    ("meta", "limit"),
    [(None, 50.0), ({calls.WAIT_S: 5}, 5.0), ({calls.WAIT_S: 2.5}, 2.5), ({calls.WAIT_S: 500}, 50.0)]
    + [({calls.WAIT_S: bad}, 50.0) for bad in (-1, True, "5", None)],
)
def test_a_request_may_ask_for_a_shorter_wait_never_a_longer_one(meta: dict[str, Any] | None, limit: float) -> None:
    assert calls.wait_limit(meta, 50.0) == limit


def test_a_success_is_its_observation_and_a_short_text() -> None:
    seen = observation(data={"invoice_id": "inv_1", "status": "open"})
    result = results.observed(seen)
    assert result.is_error is False and result.structured_content == seen
    assert "SUCCESS" in result.content[0].text and "inv_1" in result.content[0].text  # type: ignore[union-attr]


def test_a_refusal_is_an_error_with_its_field_errors_and_next_action() -> None:
    feedback = {
        "feedback": {
            "field_errors": [
                {
                    "field": "invoice_id",
                    "code": "type_mismatch",
                    "message": "wrong type",
                    "expected": "string",
                    "actual": "integer",
                }
            ],
            "next_action": "repair_arguments",
            "retry_after_ms": None,
        }
    }
    result = results.observed(
        observation("TYPE_MISMATCH", feedback, [{"field": "invoice_id", "message": "m", "code": "c"}])
    )
    assert result.is_error is True
    text = result.content[0].text  # type: ignore[union-attr]
    assert "TYPE_MISMATCH" in text and "invoice_id: type_mismatch" in text and "expected string, got integer" in text
    assert "next_action: repair_arguments" in text


def test_a_held_call_past_the_wait_limit_says_what_it_awaits() -> None:
    interim = observation(data={"approval": {"approval_id": "appr_1", "required_approvals": 2, "expires_at_ms": 0}})
    interim["status"]["code"] = 202
    assert results.is_interim(interim)
    state = results.ApprovalState("appr_1", "PENDING", 2, 1, ("finance-controllers",), 1_800_000_000_000)
    result = results.awaiting(interim, state)
    assert result.is_error is False and result.structured_content == interim
    text = result.content[0].text  # type: ignore[union-attr]
    assert "appr_1" in text and "1 of 2" in text and "finance-controllers" in text and "2027-01-15T08:00:00Z" in text
    assert "toolgate_call_status" in text and "call_1" in text
    assert "0 of 2" in results.awaiting(interim, None).content[0].text  # type: ignore[union-attr]


def test_the_door_refuses_before_proposing_as_an_error_without_an_observation() -> None:
    result = results.refused("unknown tool")
    assert result.is_error is True and result.structured_content is None
    assert results.unanswered("call_9", 5).is_error is True
