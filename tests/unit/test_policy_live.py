"""Deployed and shadow policy sets (issue 51, parts 4 and 5), their pure parts: a deployment's
signature covers its id, role, digest and deployer; stored files are admitted under the digest
they name, or refused; a shadow set's decisions are compared with the enforcing set's on the
same round, and change neither those decisions nor the usage they spend."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.factories import registry
from tests.unit.test_policy_round import Call, charge, decided
from toolgate.contracts.admission import ContractRefused
from toolgate.contracts.budgets import BUDGETS_FILE, budgets_file
from toolgate.contracts.cedar_policy import policy_files
from toolgate.contracts.policy_set import load_policy_set
from toolgate.contracts.stored_sets import admit_files, files_of
from toolgate.store import batch
from toolgate.trust.checkpoint_keys import TrustedKeys
from toolgate.trust.ed25519 import PrivateKey
from toolgate.trust.policy_signing import Signed, sign, verified
from toolgate.workers.policy.case import Usage
from toolgate.workers.policy.shadow import ALLOW, ShadowRound

from .test_cedar_policy import DOMAINS, NOON

STRICT = """
@id("baseline")
permit (principal, action, resource) when { principal in resource.tenant };

@id("no-charge-over-1000")
@message("no card charge over 1,000 USD")
forbid (principal, action in Action::"payment.charge_card", resource)
when { context.arguments.currency == "USD" && context.arguments.amount_cents > 100000 };
"""


def shipped_files() -> dict[str, str]:
    files = {Path(source).name: text for source, text in policy_files()}
    source, text = budgets_file()
    return {**files, Path(source).name: text}


def test_a_deployments_signature_covers_its_id_role_digest_and_deployer() -> None:
    key, other = PrivateKey(b"k" * 32), PrivateKey(b"o" * 32)
    trusted = TrustedKeys([key.public])
    key_id = next(iter(trusted.keys))
    signed = Signed(7, "enforcing", "ab" * 32, "alice")
    signature = sign(signed, key)
    assert verified(signed, key_id, signature, trusted)
    for changed in (
        Signed(8, "enforcing", "ab" * 32, "alice"),  # an old row copied under a new id
        Signed(7, "shadow", "ab" * 32, "alice"),
        Signed(7, "enforcing", "cd" * 32, "alice"),
        Signed(7, "enforcing", "ab" * 32, "mallory"),
    ):
        assert not verified(changed, key_id, signature, trusted)
    assert not verified(signed, key_id, sign(signed, other), trusted)  # a key the worker does not trust
    assert not verified(signed, "dk_0000000000000000", signature, trusted)
    assert not verified(signed, key_id, b"", trusted)


def test_stored_files_are_the_set_their_digest_names_or_refused(tmp_path: Path) -> None:
    files = shipped_files()
    admitted = admit_files(files, registry(), load_policy_set(registry()).digest)
    assert admitted.digest == load_policy_set(registry()).digest  # the same set wherever its files are
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    assert files_of(tmp_path) == files
    tampered = {**files, BUDGETS_FILE: files[BUDGETS_FILE].replace("{", "{ ", 1)}
    with pytest.raises(ContractRefused, match=r"not the \w+ it names"):
        admit_files(tampered, registry(), admitted.digest)
    with pytest.raises(ContractRefused, match=r"neither policies nor budgets: notes\.txt"):
        admit_files({**files, "notes.txt": "x"}, registry())
    with pytest.raises(ContractRefused, match="budgets refused"):
        admit_files({k: v for k, v in files.items() if k != BUDGETS_FILE}, registry())


def strict_set() -> ShadowRound:
    files = {**{k: v for k, v in shipped_files().items() if k == BUDGETS_FILE}, "strict.cedar": STRICT}
    return ShadowRound(admit_files(files, registry()), Usage())


def test_a_shadow_disagrees_where_it_decides_otherwise_and_changes_nothing() -> None:
    calls: list[Call] = [charge(1, cents=50_000), charge(2, cents=250_000), charge(3, cents=50_000, run_id="r2")]
    enforcing = load_policy_set(registry())
    decisions, used = decided(enforcing.cedar, calls)
    spent = (dict(used.per_run), dict(used.per_day))
    shadow = strict_set()
    found = shadow.disagreements(enforcing.digest, decisions, calls, known_of(calls), NOON, "dev", frozenset(), DOMAINS)
    assert [(row[1], row[6], row[9], row[10]) for row in found] == [
        ("call_2", ALLOW, "POLICY_VIOLATION", "policy.no-charge-over-1000")
    ]
    assert found[0][4:6] == (enforcing.digest, shadow.set.digest)
    assert (dict(used.per_run), dict(used.per_day)) == spent  # the enforcing round's usage untouched


def known_of(calls: list[Call]) -> dict[object, object]:
    from toolgate.workers.policy.decision import refs

    known: dict[object, object] = {}
    for record, c, _ in calls:
        row = {"tenant_id": "acme", "status": "open", "currency": "USD", "amount_cents": 0}
        row["amount_cents"] = record.call.arguments.get("amount_cents", 0)
        known.update({(lookup, v): ({"id": v, **row},) for lookup, v in refs(record, c) if isinstance(v, str)})
    return known


def test_a_worker_asks_for_a_deployment_it_neither_holds_nor_refused() -> None:
    from toolgate.settings import Settings
    from toolgate.workers.policy.live import LiveSets

    live = LiveSets(registry(), Settings(), load_policy_set(registry()))
    rows = batch.Result(["role", "id"], [("enforcing", 4), ("shadow", 6)])
    assert live.changed(rows) == {"enforcing": 4, "shadow": 6}
    live.held["enforcing"] = 4
    live.refused.add(6)
    assert live.changed(rows) == {}
    assert live.shadow_round(Usage()) is None  # no shadow: nothing judged twice


def test_stored_files_of_another_shape_are_refused() -> None:
    for files in (["rules.cedar"], {"rules.cedar": 1}):
        with pytest.raises(ContractRefused, match="not a mapping of file names to texts"):
            admit_files(files, registry())  # type: ignore[arg-type]


class FailingShadow(ShadowRound):
    def disagreements(self, *args: object, **kwargs: object) -> list[tuple[str | int, ...]]:
        raise RuntimeError("the candidate broke")


def test_a_shadow_that_fails_to_judge_changes_nothing() -> None:
    from toolgate.settings import Settings
    from toolgate.workers.policy.live import LiveSets

    live = LiveSets(registry(), Settings(), load_policy_set(registry()))
    failing = FailingShadow(strict_set().set, Usage())
    assert live.disagreements(failing, []) == []


ASKS_APPROVAL = """
@id("baseline")
permit (principal, action, resource) when { principal in resource.tenant };

@id("fetch-needs-one")
@approvals("1")
permit (principal, action in Action::"invoice.fetch", resource) when { principal in resource.tenant };
"""


def test_a_shadow_asking_for_more_approvals_disagrees_on_the_approvals() -> None:
    from tests.unit.test_policy_round import call

    calls: list[Call] = [call("invoice.fetch", 1, {"invoice_id": "inv_acme0001"}), charge(2, cents=50_000)]
    enforcing = load_policy_set(registry())
    decisions, _ = decided(enforcing.cedar, calls)
    files = {BUDGETS_FILE: shipped_files()[BUDGETS_FILE], "asks.cedar": ASKS_APPROVAL}
    shadow = ShadowRound(admit_files(files, registry()), Usage())
    found = shadow.disagreements(enforcing.digest, decisions, calls, known_of(calls), NOON, "dev", frozenset(), DOMAINS)
    assert [(row[1], row[6:]) for row in found] == [("call_1", (ALLOW, "", 0, ALLOW, "", 1))]
