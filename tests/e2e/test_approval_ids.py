"""An approver copies an approval id from `toolgate approvals list` and types it back (issue 52,
part 7): the table never cuts an id at a 80- or 100-column terminal; `show`, `approve` and `deny`
take any start of an id that names only it (a `%` or `_` typed is that character, never a
wildcard) and refuse one that names several, signing nothing; `approve` and `deny` take several
ids, one signed decision each, and say what became of each (part 4's batch decisions)."""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest

from ..conftest import Pipeline
from .test_approval_cards import held_email
from .test_gates import status_of

pytestmark = pytest.mark.timeout(240)


def cli(pipeline: Pipeline, *args: str, columns: int = 1000) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolgate.cli", *args],
        env={**pipeline.env, "COLUMNS": str(columns)},
        capture_output=True,
        text=True,
        timeout=90,
    )


def unique_prefix(pipeline: Pipeline, approval_id: str) -> str:
    """The shortest start of `approval_id` that no other ticket's id starts with."""
    others = [
        r[0] for r in pipeline.sql("SELECT approval_id FROM toolgate.approvals WHERE approval_id <> %s", (approval_id,))
    ]
    for n in range(len("appr_") + 1, len(approval_id)):
        if not any(o.startswith(approval_id[:n]) for o in others):
            return approval_id[:n]
    return approval_id


def decisions_on(pipeline: Pipeline, *approval_ids: str) -> int:
    rows = pipeline.sql(
        "SELECT count(*) FROM toolgate.approval_decisions WHERE approval_id = ANY(%s)", (list(approval_ids),)
    )
    return int(rows[0][0])


@pytest.mark.parametrize("columns", [80, 100])
def test_the_list_shows_every_id_whole(pipeline: Pipeline, columns: int) -> None:
    first, second = held_email(pipeline), held_email(pipeline)
    listed = cli(pipeline, "approvals", "list", columns=columns)
    assert listed.returncode == 0, listed.stderr
    assert "…" not in listed.stdout
    assert max(len(line) for line in listed.stdout.splitlines()) <= columns
    newest = [
        r[0] for r in pipeline.sql("SELECT approval_id FROM toolgate.approvals ORDER BY created_at DESC LIMIT 50")
    ]
    shown = listed.stdout.split()
    assert first in shown and second in shown
    assert all(approval_id in shown for approval_id in newest)
    assert cli(pipeline, "approvals", "deny", first, second, "--as", "carol").returncode == 0


def test_a_unique_prefix_is_the_approval_and_its_full_id_is_signed(pipeline: Pipeline) -> None:
    approval_id = held_email(pipeline)
    prefix = unique_prefix(pipeline, approval_id)
    assert prefix != approval_id
    card = cli(pipeline, "approvals", "show", prefix)
    assert card.returncode == 0, card.stdout + card.stderr
    assert f"CONFIRMATION REQUEST {approval_id}" in card.stdout
    assert "{'" not in card.stdout  # states as JSON, never a Python repr
    denied = cli(pipeline, "approvals", "deny", prefix, "--as", "carol", "--reason", "not today")
    assert denied.returncode == 0, denied.stdout + denied.stderr
    assert f"carol denied {approval_id} (decision dec_" in denied.stdout
    assert "counted: the approval is now DENIED" in denied.stdout
    [(signed_for,)] = pipeline.sql(
        "SELECT approval_id FROM toolgate.approval_decisions WHERE approval_id = %s", (approval_id,)
    )
    assert signed_for == approval_id
    assert status_of(pipeline, approval_id) == "DENIED"


def test_an_ambiguous_prefix_is_refused_naming_the_candidates_and_nothing_is_signed(pipeline: Pipeline) -> None:
    first, second = held_email(pipeline), held_email(pipeline)
    common = "appr_"  # the start of every approval id
    refused = cli(pipeline, "approvals", "approve", common, "--as", "carol")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    said = " ".join(refused.stdout.split())
    assert "appr_ is the start of several approval ids: appr_" in said and "type more of one" in said
    assert decisions_on(pipeline, first, second) == 0
    shown = cli(pipeline, "approvals", "show", common)
    assert shown.returncode == 1 and "several approval ids" in shown.stdout
    # One id of a batch that names several: nothing at all is signed, not even the clear one.
    batch = cli(pipeline, "approvals", "approve", first, common, "--as", "carol")
    assert batch.returncode == 1, batch.stdout + batch.stderr
    assert decisions_on(pipeline, first, second) == 0
    assert status_of(pipeline, first) == "PENDING" and status_of(pipeline, second) == "PENDING"
    assert cli(pipeline, "approvals", "deny", first, second, "--as", "carol").returncode == 0


def test_a_percent_or_underscore_typed_is_literal(pipeline: Pipeline) -> None:
    approval_id = held_email(pipeline)
    tail = unique_prefix(pipeline, approval_id)[len("appr_") :]
    # Each would name this approval (or several) were `%` and `_` wildcards; typed, they name none.
    for typed in (f"appr%{tail}", f"%{tail}", f"appr__{tail[1:]}", "appr_" + "_" * len(tail)):
        refused = cli(pipeline, "approvals", "approve", typed, "--as", "carol")
        assert refused.returncode == 1, (typed, refused.stdout + refused.stderr)
        assert f"no approval {typed}" in " ".join(refused.stdout.split()), typed
    assert decisions_on(pipeline, approval_id) == 0
    missing = cli(pipeline, "approvals", "show", f"appr_nothing{uuid.uuid4().hex}")
    assert missing.returncode == 1 and "no approval appr_nothing" in missing.stdout
    assert cli(pipeline, "approvals", "deny", approval_id, "--as", "carol").returncode == 0


def test_a_batch_approval_signs_each_and_both_are_counted(pipeline: Pipeline) -> None:
    first, second = held_email(pipeline), held_email(pipeline)
    approved = cli(pipeline, "approvals", "approve", unique_prefix(pipeline, first), second, "--as", "carol")
    assert approved.returncode == 0, approved.stdout + approved.stderr
    assert approved.stdout.count("counted: the approval is now APPROVED") == 2
    assert f"carol approved {first} (decision" in approved.stdout
    assert f"carol approved {second} (decision" in approved.stdout
    rows = pipeline.sql(
        "SELECT approval_id, approver_id, verdict FROM toolgate.approval_decisions WHERE approval_id = ANY(%s) "
        "ORDER BY approval_id",
        ([first, second],),
    )
    assert rows == sorted([(first, "carol", "APPROVE"), (second, "carol", "APPROVE")])
    assert status_of(pipeline, first) == "APPROVED" and status_of(pipeline, second) == "APPROVED"
    again = cli(pipeline, "approvals", "approve", first, second, "--as", "carol", "--json")  # a double click
    assert again.returncode == 0, again.stdout + again.stderr
    outcomes = [line for line in again.stdout.splitlines() if line.startswith("{")]
    assert len(outcomes) == 2 and all('"outcome": "noop"' in line for line in outcomes)


def test_a_batch_with_one_refused_exits_1_and_reports_each(pipeline: Pipeline) -> None:
    first, second = held_email(pipeline), held_email(pipeline)
    assert cli(pipeline, "approvals", "deny", first, "--as", "carol").returncode == 0
    both = cli(pipeline, "approvals", "approve", first, second, "--as", "alice")
    assert both.returncode == 1, both.stdout + both.stderr
    said = " ".join(both.stdout.split())
    assert f"alice approved {first} (decision" in said and f"alice approved {second} (decision" in said
    assert "refused: approval_closed" in said  # the first: denied already
    assert "counted: the approval is now APPROVED" in said  # the second: counted all the same
    assert status_of(pipeline, first) == "DENIED" and status_of(pipeline, second) == "APPROVED"
