"""A Cedar policy set that cannot be admitted keeps the policy worker from starting (issue 51):
through a real `toolgate up` with TOOLGATE_POLICY_DIR naming a set whose policy reads an argument
its action does not have. The worker says why, every problem named, in its log; `toolgate up`
gives up on it, says which worker and where its log is, stops everything it started and exits
non-zero. Nothing is half-applied: no worker ever decided a call under that set."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from toolgate.contracts.budgets import BUDGETS_FILE, load_budgets

from ..conftest import session_env

pytestmark = pytest.mark.timeout(240)

BAD = """\
@id("baseline")
permit (principal, action, resource) when { principal in resource.tenant };

@id("email-amount")
@message("no e-mail about large amounts")
forbid (principal, action in Action::"notify.send_email", resource)
when { context.arguments.amount_cents > 100000 };

@id("no-count")
@approvals("two")
permit (principal, action in Action::"payment.charge_card", resource) when { principal in resource.tenant };
"""


def test_a_policy_set_that_cannot_be_admitted_keeps_the_policy_worker_from_starting(tmp_path: Path) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "bad.cedar").write_text(BAD)
    (policies / BUDGETS_FILE).write_text(json.dumps(load_budgets().document))  # the budgets are fine
    home = tmp_path / "home"
    home.mkdir()
    env = session_env(home, TOOLGATE_POLICY_DIR=str(policies))
    done = subprocess.run(
        [sys.executable, "-m", "toolgate.cli", "up", "--partitions", "1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=200,
    )
    said = done.stdout + done.stderr
    assert done.returncode != 0, said
    assert "worker policy exited with 1" in said and "policy.log" in said, said
    assert "toolgate is up" not in said
    log = (home / "logs" / "policy.log").read_text()
    refusal = f"toolgate worker policy refused to start: Cedar policy set refused: {policies / 'bad.cedar'}: "
    assert refusal in log, log
    assert f"{policies / 'bad.cedar'}: policy email-amount: " in log and "amount_cents" in log
    assert f"{policies / 'bad.cedar'}: policy no-count: @approvals('two') is not a whole number" in log
    assert '"action": "refused_to_start"' in log  # the structured line, beside the message on stderr
    assert not (home / "runtime.json").exists()  # everything it started is stopped
