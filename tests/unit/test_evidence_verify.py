"""`toolgate evidence verify` (ops/evidence_checks/, cli/evidence_verify.py): the bundles of
tests/unit/evidence_bundles.py verify; each single-byte tampering fails the check that covers
it, with a sentence naming what does not hold, and only that check (or the ones that must fail
with it); missing parts are skipped by name, malformed ones fail the check that reads them."""

from __future__ import annotations

import base64
import copy
import json
import random
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests import evidence_vectors
from tests.unit import evidence_bundles as eb
from tests.unit.test_decision_record import stricter
from toolgate.cli.main import app
from toolgate.contracts.policy_set import PolicySet, load_policy_set
from toolgate.contracts.registry import Registry, load_registry
from toolgate.ops.evidence_checks.run import verify
from toolgate.ops.evidence_checks.trust import UNPINNED, trust_of
from toolgate.ops.evidence_checks.verdict import NAMES, Status, Verdict
from toolgate.schemas.hashing import payload_hash
from toolgate.trust import proposal_signing
from toolgate.trust.ed25519 import PrivateKey
from toolgate.trust.signed_note import COSIGNATURE_V1, vkey

Bundle = dict[str, Any]


@cache
def deciders() -> tuple[Registry, PolicySet]:
    registry = load_registry()
    return registry, load_policy_set(registry)


@cache
def made(kind: str) -> str:
    return json.dumps(eb.approved() if kind == "approved" else eb.refused())


def bundle(kind: str = "approved") -> Bundle:
    return dict(json.loads(made(kind)))


def verdict(b: Bundle, deployment: list[bytes] | None = None, witnesses: list[str] | None = None) -> Verdict:
    return verify(b, trust_of(b, deployment or [], witnesses or []), *deciders())


def failed(v: Verdict) -> set[str]:
    return {c.name for c in v.checks if c.status is Status.FAILED}


def detail(v: Verdict, name: str) -> str:
    return next(c.detail for c in v.checks if c.name == name)


def flip(text: str, at: int = 10) -> str:
    """Base64 text with one bit of its byte `at` flipped."""
    raw = bytearray(base64.b64decode(text))
    raw[at] ^= 0x01
    return base64.b64encode(bytes(raw)).decode()


def one_char(text: str, old: str, new: str) -> str:
    """`text` with the first `old` replaced by `new`, one character changed."""
    assert len(old) == len(new) and sum(a != b for a, b in zip(old, new, strict=True)) == 1 and old in text
    return text.replace(old, new, 1)


def in_b64(text: str, old: str, new: str) -> str:
    return base64.b64encode(one_char(base64.b64decode(text).decode(), old, new).encode()).decode()


def test_the_approved_charges_bundle_verifies_every_check() -> None:
    v = verdict(bundle())
    assert v.ok and [c.name for c in v.checks] == list(NAMES)
    assert {c.status for c in v.checks} == {Status.OK}
    assert detail(v, "approval.quorum") == "2 of 2 required approvals: alice, bob"
    assert detail(v, "decisions.rederived") == "made again as recorded: policy allowed, 2 approvals"


def test_the_refused_charges_bundle_proves_the_refusal() -> None:
    v = verdict(bundle("refused"))
    skipped = {c.name for c in v.checks if c.status is Status.SKIPPED}
    assert v.ok and skipped == {"approval.signatures", "approval.state_version", "approval.quorum", "execution.once"}
    assert "refused POLICY_VIOLATION policy.charge-hard-limit" in detail(v, "decisions.rederived")
    assert "Merkle" not in detail(v, "proposal.signature")  # signed alone; its observation in a round of two


def _set(path: list[str | int], change: Callable[[Any], Any]) -> Callable[[Bundle], None]:
    def tamper(b: Bundle) -> None:
        at: Any = b
        for step in path[:-1]:
            at = at[step]
        at[path[-1]] = change(at[path[-1]])

    return tamper


def _note_root() -> Callable[[Bundle], None]:
    """The first base64 character of the root hash in the checkpoint note's text changed."""

    def change(note: str) -> str:
        lines = note.split("\n")
        lines[2] = ("A" if lines[2][0] != "A" else "B") + lines[2][1:]
        return "\n".join(lines)

    return _set(["audit", "checkpoint", "note"], change)


def _signature_line(index: int) -> Callable[[Bundle], None]:
    """A bit of the signature on the note's signature line `index` flipped (after its key id)."""

    def change(note: str) -> str:
        text, _, lines = note.rpartition("\n\n")
        signed = lines.split("\n")
        dash, name, encoded = signed[index].split(" ")
        signed[index] = f"{dash} {name} {flip(encoded, 20)}"
        return text + "\n\n" + "\n".join(signed)

    return _set(["audit", "checkpoint", "note"], change)


# (what is tampered, the bundle, the tampering, the checks that fail, what one of their sentences says)
TAMPERINGS: list[tuple[str, str, Callable[[Bundle], None], set[str], str]] = [
    (
        "an argument of the validated call",
        "approved",
        _set(["call", "arguments", "invoice_id"], lambda v: one_char(v, "0001", "0002")),
        {"call.payload_hash", "decisions.rederived"},
        "payload_hash",
    ),
    (
        "an argument of the proposal's text",
        "approved",
        _set(["proposal", "arguments"], lambda v: one_char(v, "600000", "600001")),
        {"proposal.arguments", "call.payload_hash"},
        "arguments_sha256",
    ),
    (
        "the proposal's signature",
        "refused",
        _set(["proposal", "signature"], flip),
        {"proposal.signature"},
        "agent agent_1",
    ),
    (
        "the signed document",
        "approved",
        _set(["proposal", "document"], lambda v: in_b64(v, '"run_1"', '"run_2"')),
        {"proposal.signature", "call.digest"},
        "agent agent_1",
    ),
    (
        "a decision's signature",
        "approved",
        _set(["approval", "decisions", 0, "signature"], flip),
        {"approval.signatures", "approval.quorum"},
        "dec_alice",
    ),
    (
        "the ticket's state version",
        "approved",
        _set(["approval", "ticket", "state_version"], lambda v: one_char(v, "v7", "v8")),
        {"approval.state_version"},
        "state version",
    ),
    (
        "the state version a decision signed",
        "approved",
        _set(["approval", "decisions", 1, "signed"], lambda v: in_b64(v, '"v7"', '"v8"')),
        {"approval.signatures", "approval.state_version", "approval.quorum"},
        "dec_bob",
    ),
    (
        "an audit row's actor",
        "approved",
        _set(["audit", "rows", 1, "actor"], lambda v: one_char(v, "user_1", "user_2")),
        {"audit.rows"},
        "audit row 7",
    ),
    (
        "an audit row's hash",
        "refused",
        _set(["audit", "rows", 0, "hash"], lambda v: ("1" if v[0] != "1" else "2") + v[1:]),
        {"audit.rows", "audit.inclusion"},
        "audit row 6",
    ),
    (
        "the key's status",
        "approved",
        _set(["execution", "status"], lambda v: one_char(v, "COMPLETED", "COMPLETEd")),
        {"execution.once"},
        "COMPLETEd",
    ),
    (
        "the observation's value",
        "approved",
        _set(["observations", 0, "value"], lambda v: flip(v, 3)),
        {"observation.signature"},
        "observation 0",
    ),
    (
        "the observation's value, sealed under a root",
        "refused",
        _set(["observations", 0, "value"], lambda v: flip(v, 3)),
        {"observation.signature"},
        "observation 0",
    ),
    (
        "the checkpoint note's root",
        "approved",
        _note_root(),
        {"checkpoint.signature", "checkpoint.cosignatures"},
        "root_hash",
    ),
    (
        "the checkpoint's root hash beside its note",
        "refused",
        _set(["audit", "checkpoint", "root_hash"], lambda v: ("1" if v[0] != "1" else "2") + v[1:]),
        {"checkpoint.signature", "audit.inclusion"},
        "not leaf 5 of the checkpoint's tree",
    ),
    (
        "the deployment's signature of the checkpoint",
        "approved",
        _signature_line(0),
        {"checkpoint.signature"},
        "does not verify",
    ),
    (
        "the witness's cosignature",
        "refused",
        _signature_line(1),
        {"checkpoint.cosignatures"},
        "witness.example/w1",
    ),
    (
        "the recorded decision's code",
        "refused",
        _set(["decisions", 0, "code"], lambda v: one_char(v, "limit", "limiT")),
        {"decisions.rederived"},
        "recorded refused POLICY_VIOLATION policy.charge-hard-limiT",
    ),
]


@pytest.mark.parametrize(("what", "kind", "tamper", "failing", "said"), TAMPERINGS, ids=[t[0] for t in TAMPERINGS])
def test_a_tampering_fails_the_check_that_covers_it(
    what: str, kind: str, tamper: Callable[[Bundle], None], failing: set[str], said: str
) -> None:
    b = bundle(kind)
    tamper(b)
    assert b != bundle(kind), what
    v = verdict(b)
    assert failed(v) == failing
    assert any(said in detail(v, name) for name in failing)
    assert all(detail(v, name) for name in failing)  # each failure says what does not hold


def test_no_byte_changed_anywhere_makes_the_verifier_fail_to_answer() -> None:
    """A hostile bundle is answered with a verdict of every check, never an exception: each of 300
    characters of the approved bundle's text changed (where it still parses)."""
    text = made("approved")
    rng = random.Random(53)
    for at in sorted(rng.sample(range(len(text)), 300)):
        changed = text[:at] + ("0" if text[at] != "0" else "1") + text[at + 1 :]
        try:
            b = json.loads(changed)
        except json.JSONDecodeError:
            continue
        v = verdict(b)
        assert [c.name for c in v.checks] == list(NAMES)
        assert all(c.detail for c in v.checks if c.status is not Status.OK)


def test_pinned_keys_replace_the_bundles_own() -> None:
    b = bundle()
    pinned = verdict(b, [eb.DEPLOYMENT.public.raw], [vkey(eb.WITNESS_NAME, COSIGNATURE_V1, eb.WITNESS.public.raw)])
    assert pinned.ok and not any(UNPINNED in c.detail or "not pinned" in c.detail for c in pinned.checks)
    assert UNPINNED in detail(verdict(b), "checkpoint.signature")
    other = PrivateKey(b"\x77" * 32).public.raw
    v = verdict(b, [other])
    assert failed(v) == {"observation.signature", "checkpoint.signature"}
    assert "not trusted" in detail(v, "checkpoint.signature")


def test_a_witness_without_a_line_is_reported_not_failed_unless_pinned() -> None:
    stranger = vkey("witness.example/w2", COSIGNATURE_V1, PrivateKey(b"\x78" * 32).public.raw)
    b = bundle()
    b["keys"]["witnesses"].append({"name": "witness.example/w2", "vkey": stranger})
    v = verdict(b)
    assert v.ok and "no line from witness.example/w2" in detail(v, "checkpoint.cosignatures")
    v = verdict(bundle(), witnesses=[stranger])  # the auditor requires the witness it pins
    assert failed(v) == {"checkpoint.cosignatures"}
    assert "you pinned did not cosign the checkpoint: witness.example/w2" in detail(v, "checkpoint.cosignatures")
    b = bundle()
    b["keys"]["witnesses"][0]["vkey"] = "not a verifier key"  # a malformed part fails the check that reads it
    v = verdict(b)
    assert failed(v) == {"checkpoint.cosignatures"} and "unreadable" in detail(v, "checkpoint.cosignatures")
    b = bundle()
    b["keys"]["witnesses"] = []
    assert verdict(b).status_of("checkpoint.cosignatures") is Status.SKIPPED


def test_a_bundle_key_whose_id_is_not_its_keys_is_ignored() -> None:
    b = bundle()
    b["keys"]["deployment"][0]["key_id"] = "dk_0000000000000000"
    assert failed(verdict(b)) == {"observation.signature", "checkpoint.signature"}


def test_rows_from_before_0036_skip_what_they_do_not_hold() -> None:
    b = bundle("refused")
    b["proposal"] = {"document": None, "signature": None, "proof": None, "arguments": None}
    b["observations"] = []
    v = verdict(b)
    skipped = {c.name for c in v.checks if c.status is Status.SKIPPED}
    assert v.ok and {"proposal.signature", "proposal.document", "proposal.arguments", "call.digest"} <= skipped
    assert "observation.signature" in skipped and "proposal.document" in detail(v, "proposal.signature")


def test_a_row_newer_than_the_checkpoint_is_not_yet_proven_in_the_log() -> None:
    b = bundle()
    b["audit"]["rows"][-1]["inclusion"] = None
    v = verdict(b)
    assert failed(v) == {"audit.inclusion"} and "newer than the checkpoint" in detail(v, "audit.inclusion")
    b["audit"]["checkpoint"] = None
    v = verdict(b)
    assert failed(v) == {"audit.inclusion"}
    assert v.status_of("checkpoint.signature") is v.status_of("checkpoint.cosignatures") is Status.SKIPPED


def test_a_malformed_part_fails_the_checks_that_read_it_and_no_other() -> None:
    b = bundle()
    del b["audit"]["checkpoint"]["note"]
    v = verdict(b)  # inclusion is checked against the checkpoint's tree_size and root_hash, not its note
    assert failed(v) == {"checkpoint.signature", "checkpoint.cosignatures"}
    assert "audit.checkpoint.note" in detail(v, "checkpoint.signature")
    b = bundle()
    b["approval"]["decisions"][0]["signed"] = "not base64!"
    assert failed(verdict(b)) == {"approval.signatures", "approval.state_version", "approval.quorum"}
    assert not verify({"format": "other"}, trust_of({})).ok


def test_quorum_counts_only_active_approvers_of_the_tickets_risk_and_groups_in_its_window() -> None:
    def quorum(change: Callable[[Bundle], None]) -> str:
        b = bundle()
        change(b)
        v = verdict(b)
        assert failed(v) == {"approval.quorum"}, v.lines()
        return detail(v, "approval.quorum")

    revoked = eb.at(eb.NOON + 30_000)  # before alice decided
    assert "alice was not an active approver" in quorum(_set(["keys", "approvers", 0, "revoked_at"], lambda _: revoked))
    assert "may not approve" in quorum(_set(["keys", "approvers", 1, "risk_classes"], lambda _: ["LOW"]))
    assert "none of the ticket's groups" in quorum(_set(["keys", "approvers", 0, "groups"], lambda _: ["ops"]))
    early = eb.at(eb.NOON + 3_000_000)  # the decisions come after the ticket's creation no longer
    assert "outside the ticket's window" in quorum(_set(["approval", "ticket", "created_at"], lambda _: early))
    assert "1 valid approval(s) of 2" in quorum(_set(["approval", "decisions"], lambda d: [d[0], copy.deepcopy(d[0])]))
    b = bundle()
    b["approval"]["ticket"]["status"] = "DENIED"
    assert verdict(b).status_of("approval.quorum") is Status.SKIPPED


def test_decisions_are_made_again_only_with_the_contracts_and_set_that_made_them(tmp_path: Path) -> None:
    b = bundle()
    v = verify(b, trust_of(b))
    assert v.status_of("decisions.rederived") is Status.SKIPPED and "--policy" in detail(v, "decisions.rederived")
    registry = deciders()[0]
    other = stricter(tmp_path)
    v = verify(b, trust_of(b), registry, other)
    assert v.status_of("decisions.rederived") is Status.SKIPPED
    assert f"made by set {deciders()[1].digest}, not {other.digest}" in detail(v, "decisions.rederived")
    b["decisions"][0]["approvals"] = 1
    assert failed(verdict(b)) == {"decisions.rederived"}
    assert "recorded allowed, 1 approvals; made again, allowed, 2 approvals" in detail(
        verdict(b), "decisions.rederived"
    )


def validation_refused(arguments: dict[str, Any], code: str) -> Bundle:
    """A bundle of a charge validation refused: its proposal signed alone, no policy record."""
    b = bundle("refused")
    text = json.dumps(arguments)
    asked = proposal_signing.sign(
        eb.proposal(eb.TOOL, text, tool_version=eb.VERSION, created_at_ms=eb.NOON - 1000), eb.AGENT_KEY_ID, eb.AGENT
    )
    digest = proposal_signing.digest(asked)
    b["proposal"] = {
        "document": eb.b64(proposal_signing.signed_bytes(asked)),
        "signature": eb.b64(asked.signature or b""),
        "proof": None,
        "arguments": text,
    }
    b["call"] = {"arguments": None, "payload_hash": None, "proposal_digest": digest}
    b["decisions"] = [
        {
            "stage": "validation",
            "outcome": "refuse",
            "decided_at_ms": eb.NOON,
            "tool_name": eb.TOOL,
            "tool_version": eb.VERSION,
            "contracts_digest": deciders()[0].digest,
            "policy_digest": None,
            "taxonomy_class": "STRUCTURAL_VIOLATION",
            "code": code,
            "record": None,
        }
    ]
    b["observations"] = []
    return b


def test_a_validation_refusal_is_made_again_on_the_proposal_as_signed() -> None:
    v = verdict(validation_refused({"invoice_id": "inv_acme0001", "amount_cents": 600_000}, "missing_field"))
    assert v.ok and "validation refused STRUCTURAL_VIOLATION missing_field" in detail(v, "decisions.rederived")
    assert v.status_of("call.payload_hash") is Status.SKIPPED
    v = verdict(validation_refused({"invoice_id": "inv_acme0001", "amount_cents": 600_000}, "missing_fielD"))
    assert failed(v) == {"decisions.rederived"}
    whole = {"invoice_id": "inv_acme0001", "amount_cents": 600_000, "currency": "USD"}
    v = verdict(validation_refused(whole, "invoice_not_open"))  # a semantic rule's refusal: facts not recorded
    assert v.ok and v.status_of("decisions.rederived") is Status.SKIPPED
    assert payload_hash(whole) != ""


def test_the_command_prints_a_line_per_check_or_the_verdict_as_json(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(made("approved"))
    tampered = bundle()
    tampered["approval"]["ticket"]["state_version"] = "v8"
    bad.write_text(json.dumps(tampered))
    runner = CliRunner()
    answer = runner.invoke(app, ["evidence", "verify", str(good), "--json"])
    assert answer.exit_code == 0, answer.output
    said = json.loads(answer.output)
    assert said["ok"] is True and [c["name"] for c in said["checks"]] == list(NAMES)
    assert set(said["checks"][0]) == {"name", "status", "detail"}
    answer = runner.invoke(app, ["evidence", "verify", str(bad)], env={"COLUMNS": "300"})
    assert answer.exit_code == 1
    assert "approval.state_version   FAILED: decision dec_alice signs state version 'v7'" in answer.output
    assert "keys: the bundle's own" in answer.output
    pinned = ["--deployment-key", eb.b64(eb.DEPLOYMENT.public.raw)]
    answer = runner.invoke(app, ["evidence", "verify", str(good), *pinned], env={"COLUMNS": "300"})
    assert (
        answer.exit_code == 0
        and "--deployment-key" not in answer.output
        and "(pin them with --witness-key)" in answer.output
    )
    answer = runner.invoke(app, ["evidence", "verify", str(good), "--deployment-key", "nope"])
    assert answer.exit_code == 2


def test_a_held_call_executed_without_its_approval_fails_its_quorum() -> None:
    b = bundle()
    b["approval"] = None
    v = verdict(b)
    assert failed(v) == {"approval.quorum"}
    assert detail(v, "approval.quorum") == "policy required 2 approvals; the bundle holds none"
    b["execution"] = None  # held and never executed: nothing to prove
    assert verdict(b).status_of("approval.quorum") is Status.SKIPPED


def test_an_edited_call_is_proven_by_the_original_proposal_and_the_editors_signed_edit() -> None:
    vectors = evidence_vectors.vectors()
    b = vectors["edited"][0]
    v = verify(b, trust_of(b))
    assert failed(v) == set() and detail(v, "approval.quorum") == "2 of 2 required approvals: alice, bob"
    assert detail(v, "call.payload_hash").endswith("edited, as the editor signed, into the edited ticket's")
    changed = copy.deepcopy(b)
    changed["approval"]["ticket"]["payload_hash"] = payload_hash({"amount_cents": 1})  # not what alice's edit made
    v = verify(changed, trust_of(changed))
    assert "the edited arguments alice signed are not the edited call's ticket's" in detail(v, "call.payload_hash")
    changed = copy.deepcopy(b)
    changed["call"]["arguments"]["amount_cents"] = 10000  # the edited arguments as if the agent had asked them
    changed["call"]["payload_hash"] = payload_hash(changed["call"]["arguments"])
    v = verify(changed, trust_of(changed))
    assert detail(v, "call.payload_hash") == "alice edited another payload hash than call.payload_hash"
    changed = copy.deepcopy(b)
    changed["edit"] = None  # without its edit, alice's approval is her unsigned vote: not counted
    assert failed(verify(changed, trust_of(changed))) == {"approval.quorum"}
    tampered = vectors["edited-tampered-edit-signature"][0]
    assert failed(verify(tampered, trust_of(tampered))) == {"approval.quorum", "call.payload_hash"}
