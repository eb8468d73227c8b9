"""`toolgate policy show|diff` (contracts/policy_view.py, cli/policy.py): a set as an operator reads
it, and what differs between two, by @id. No I/O but the sets' files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from tests.unit.factories import registry
from toolgate.cli.main import app
from toolgate.contracts.cedar_policy import policy_files
from toolgate.contracts.policy_set import load_policy_set
from toolgate.contracts.policy_view import SetView, diff, flat, view

SHIPPED = Path(__file__).resolve().parents[2] / "contracts" / "cedar"


def copy(tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    shutil.copytree(SHIPPED, target)
    return target


def shown(directory: Path) -> SetView:
    return view(load_policy_set(registry(), directory), policy_files(directory))


def test_show_lists_every_policy_by_id_with_its_annotations_and_file(tmp_path: Path) -> None:
    found = shown(copy(tmp_path, "a"))
    by_id = {p.id: p for p in found.policies}
    big = by_id["large-charge-needs-directors"]
    assert (big.effect, big.approvals, big.groups, Path(big.source).name) == (
        "permit",
        2,
        ("finance-directors",),
        "arguments.cedar",
    )
    assert by_id["charge-hard-limit"].effect == "forbid" and "10,000" in by_id["charge-hard-limit"].message
    assert found.digest == load_policy_set(registry()).digest  # the same files wherever they are
    assert found.as_json()["budgets"]["budgets"]["per_run"]["financial"] == 100


def test_diff_names_policies_added_removed_changed_and_budgets(tmp_path: Path) -> None:
    a, b = copy(tmp_path, "a"), copy(tmp_path, "b")
    assert diff(shown(a), shown(b)).same
    arguments = (b / "arguments.cedar").read_text()
    (b / "arguments.cedar").write_text(
        arguments.replace("500000", "100000").replace('@approvals("2")', '@approvals("3")')
    )
    rules = (b / "rules.cedar").read_text()
    (b / "rules.cedar").write_text(rules.replace('@id("no-secret-data")', '@id("no-secret-data-ever")'))
    (b / "extra.cedar").write_text('@id("extra") @message("no") forbid (principal, action, resource) when { false };')
    budgets = json.loads((b / "budgets.json").read_text())
    budgets["budgets"]["per_run"]["financial"] = 50
    (b / "budgets.json").write_text(json.dumps(budgets))
    found = diff(shown(a), shown(b))
    assert not found.same and found.before != found.after
    assert set(found.added) == {"extra", "no-secret-data-ever"}
    assert found.removed == ("no-secret-data",)
    assert dict(found.changed) == {"large-charge-needs-directors": ("approvals: 2 -> 3", "text")}
    assert found.budgets == ("budgets.per_run.financial: 100 -> 50",)


def test_a_comment_or_layout_is_no_change_of_a_policy(tmp_path: Path) -> None:
    a, b = copy(tmp_path, "a"), copy(tmp_path, "b")
    (b / "rules.cedar").write_text("// reviewed\n\n" + (b / "rules.cedar").read_text())
    found = diff(shown(a), shown(b))
    assert found.changed == () and found.before != found.after  # a new version, the same policies
    assert found.same is True


def test_flat_paths_of_a_document() -> None:
    assert flat({"a": {"b": 1, "c": {}}, "d": [1]}) == {"a.b": 1, "a.c": {}, "d": [1]}


def test_the_commands_exit_0_when_the_same_and_1_when_they_differ(tmp_path: Path) -> None:
    a, b = copy(tmp_path, "a"), copy(tmp_path, "b")
    runner = CliRunner()
    same = runner.invoke(app, ["policy", "diff", str(a), str(b), "--json"])
    assert same.exit_code == 0, same.output
    assert json.loads(same.output)["same"] is True
    (b / "extra.cedar").write_text('@id("extra") @message("no") forbid (principal, action, resource) when { false };')
    differs = runner.invoke(app, ["policy", "diff", str(a), str(b)])
    assert differs.exit_code == 1 and "added    extra" in differs.output
    show = runner.invoke(app, ["policy", "show", str(b), "--json"])
    assert show.exit_code == 0, show.output
    assert "extra" in [p["id"] for p in json.loads(show.output)["policies"]]
    refused = runner.invoke(app, ["policy", "show", str(tmp_path / "missing")])
    assert refused.exit_code == 2
