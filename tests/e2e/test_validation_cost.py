"""What one signature can make validation spend is bounded (N7), through the real broker and
Postgres: 64 create_draft proposals of ~240 KiB of invalid lines each, signed under one Merkle
root as the review sent them. On main each answer was the findings of ~12,000 errors, too big to
deliver and withheld, and one signature bought ~24 s of validation's CPU. Now each answer says at
most MAX_FINDINGS things, none withheld, or tells the agent to wait (its admission rate), and
validation goes on answering another tenant's call.
"""

from __future__ import annotations

import json
import uuid

import pytest

from toolgate.trust.agent_keys import AgentKeyring
from toolgate.workers.validation.schema_budget import MAX_FINDINGS

from ..conftest import Pipeline
from .test_pipeline import taxonomy

pytestmark = pytest.mark.timeout(300)

BAD = {"description": "", "quantity": 0, "unit_amount_cents": -1}


def test_a_root_of_64_oversized_refusals_costs_bounded_answers_and_others_are_still_answered(
    pipeline: Pipeline,
) -> None:
    agent = f"cost-{uuid.uuid4().hex[:8]}"
    done = pipeline.cli("agents", "add", agent, "--tenant", "acme", "--scopes", "invoices:write")
    assert done.returncode == 0, done.stderr
    signer = AgentKeyring(pipeline.home / "agents").signer(agent)
    lines = [BAD] * ((240 * 1024 - 100) // (len(json.dumps(BAD)) + 2))
    arguments = json.dumps({"customer_id": "cust_acme01", "currency": "USD", "due_date": "2030-12-31", "lines": lines})
    assert len(arguments) > 239 * 1024
    drafts = [
        pipeline.client.prepare("invoice.create_draft", arguments, signer=signer, user_id="u", watch=True)
        for _ in range(64)
    ]
    sent = pipeline.client.publish(drafts)  # one signature over all 64
    other = pipeline.call("invoice.fetch", {"invoice_id": "inv_globex0001"}, tenant_id="globex")
    assert taxonomy(other) == "SUCCESS"
    seen = [pipeline.wait(s) for s in sent]
    kinds = [taxonomy(o) for o in seen]
    assert kinds[0] == "OUT_OF_BOUNDS" and set(kinds) <= {"OUT_OF_BOUNDS", "RATE_LIMITED"}
    for observation in seen:
        data = observation["result_payload"]["data"]
        errors = observation["result_payload"]["errors"]
        assert "withheld" not in data  # main: ~1.8 MB of findings, withheld
        assert len(errors) <= MAX_FINDINGS and len(data["feedback"]["field_errors"]) <= MAX_FINDINGS
        if taxonomy(observation) == "OUT_OF_BOUNDS":
            assert (errors[0]["field"], errors[0]["code"]) == ("lines", "out_of_bounds.maxItems")
        else:  # its agent spent the validation work it may spend for now: wait and retry
            assert errors[0]["code"] == "admission_rate"
            assert observation["status"]["retryable"] is True
