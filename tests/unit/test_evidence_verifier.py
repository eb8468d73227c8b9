"""The independent evidence verifier (verifier/toolgate_evidence/): its verdict on every committed
test vector is the one expected.json names; the vectors are what tests/evidence_vectors.py makes
with toolgate's own signing code today; its own RFC 8785, Merkle paths, RFC 9162 inclusion and
signed notes agree with toolgate's and with the references; and it runs with nothing of toolgate
importable, on the standard library and `cryptography` only."""

from __future__ import annotations

import ast
import base64
import importlib
import importlib.util
import json
import struct
import subprocess
import sys
from importlib.metadata import distribution
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import evidence_vectors
from tests.unit.test_log_tree import INCLUSION, LEAVES, ROOTS
from toolgate.trust.ed25519 import PrivateKey
from toolgate.trust.log_tree import CompactRange, Known
from toolgate.trust.merkle import leaf_hash, merkle_tree
from toolgate.trust.signed_note import COSIGNATURE_V1, cosign, sign, vkey

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "verifier" / "toolgate_evidence"  # run as it is: its __main__.py
MODULES = sorted(SCRIPT.glob("*.py"))
VECTORS = REPO / "verifier" / "vectors"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "toolgate_evidence", SCRIPT / "__init__.py", submodule_search_locations=[str(SCRIPT)]
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["toolgate_evidence"] = module
    spec.loader.exec_module(module)
    return module


V = load()
NAMES = sorted(p.name for p in VECTORS.iterdir() if p.is_dir())


def read(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", NAMES)
def test_the_verdict_on_each_vector_is_the_expected_one(name: str) -> None:
    expected = read(VECTORS / name / "expected.json")
    verdict = V.verify(read(VECTORS / name / "bundle.json"))
    statuses = {c["name"]: c["status"] for c in verdict["checks"]}
    assert sorted(n for n, s in statuses.items() if s == "failed") == expected["failed"]
    assert sorted(n for n, s in statuses.items() if s == "skipped") == expected["skipped"]
    assert verdict["ok"] is (expected["failed"] == [])
    assert all(c["detail"] for c in verdict["checks"]), "every check says what it found"


def test_the_vectors_cover_both_calls_and_every_tampering_the_issue_names() -> None:
    assert {"approved", "refused", "executed-unapproved", "edited", "edited-tampered-edit-signature"} <= set(NAMES)
    for part in ("argument", "decision-signature", "state-version", "audit-row", "observation", "checkpoint"):
        assert f"tampered-{part}" in NAMES


def test_the_committed_vectors_are_what_toolgates_signing_code_makes_now(tmp_path: Path) -> None:
    written = evidence_vectors.write(tmp_path)
    assert sorted(p.parent.name for p in written) == sorted(n for n in NAMES for _ in range(2))
    for path in written:
        committed = VECTORS / path.parent.name / path.name
        assert committed.read_text(encoding="utf-8") == path.read_text(encoding="utf-8"), committed


def test_the_check_names_are_the_documented_ones() -> None:
    names = [name for name, _ in V.CHECKS]
    assert names == list(dict.fromkeys(names))
    assert names[-1] == "decisions.rederived" and len(names) == 15


def test_the_command_line_prints_the_json_verdict_and_exits_by_it() -> None:
    def run(name: str, *extra: str) -> tuple[int, dict[str, Any]]:
        args = [sys.executable, str(SCRIPT), str(VECTORS / name / "bundle.json"), "--json", *extra]
        done = subprocess.run(args, capture_output=True, text=True, check=False, timeout=60)
        return done.returncode, json.loads(done.stdout)

    code, verdict = run("approved")
    assert code == 0 and set(verdict) == {"checks", "ok"} and verdict["ok"] is True
    assert all(set(c) == {"name", "status", "detail"} for c in verdict["checks"])
    code, verdict = run("tampered-observation")
    assert code == 1 and verdict["ok"] is False


def test_pinned_keys_replace_the_bundles_own() -> None:
    bundle = read(VECTORS / "approved" / "bundle.json")
    ours = base64.b64decode(bundle["keys"]["deployment"][0]["public_key"])
    other = PrivateKey(bytes([9]) * 32).public
    witness = bundle["keys"]["witnesses"][0]["vkey"]

    def failed(deployment: list[bytes], witnesses: list[str]) -> list[str]:
        return [c["name"] for c in V.verify(bundle, deployment, witnesses)["checks"] if c["status"] == "failed"]

    assert failed([ours], [witness]) == []
    assert failed([other.raw], []) == ["observation.signature", "checkpoint.signature"]
    assert failed([], [vkey("elsewhere", COSIGNATURE_V1, other.raw)]) == ["checkpoint.cosignatures"]


def test_a_witness_the_bundle_names_without_a_line_is_reported_not_failed() -> None:
    bundle = read(VECTORS / "approved" / "bundle.json")
    silent = vkey("silent.example", COSIGNATURE_V1, PrivateKey(bytes([8]) * 32).public.raw)
    bundle["keys"]["witnesses"].append({"name": "silent.example", "vkey": silent})
    checks = {c["name"]: c for c in V.verify(bundle)["checks"]}
    assert checks["checkpoint.cosignatures"]["status"] == "ok"
    assert "silent.example" in checks["checkpoint.cosignatures"]["detail"]


def test_a_bundle_of_another_format_fails_every_check() -> None:
    verdict = V.verify({"format": "something/v2"})
    assert verdict["ok"] is False and {c["status"] for c in verdict["checks"]} == {"failed"}


# --- RFC 8785 ---------------------------------------------------------------------------------

# RFC 8785 Appendix B: IEEE 754 doubles (as hex) and their canonical text.
NUMBERS = {
    "0000000000000000": "0",
    "8000000000000000": "0",
    "0000000000000001": "5e-324",
    "8000000000000001": "-5e-324",
    "7fefffffffffffff": "1.7976931348623157e+308",
    "ffefffffffffffff": "-1.7976931348623157e+308",
    "4340000000000000": "9007199254740992",
    "c340000000000000": "-9007199254740992",
    "4430000000000000": "295147905179352830000",
    "44b52d02c7e14af5": "9.999999999999997e+22",
    "44b52d02c7e14af6": "1e+23",
    "44b52d02c7e14af7": "1.0000000000000001e+23",
    "444b1ae4d6e2ef4e": "999999999999999700000",
    "444b1ae4d6e2ef4f": "999999999999999900000",
    "444b1ae4d6e2ef50": "1e+21",
    "3eb0c6f7a0b5ed8c": "9.999999999999997e-7",
    "3eb0c6f7a0b5ed8d": "0.000001",
    "41b3de4355555553": "333333333.3333332",
    "41b3de4355555554": "333333333.33333325",
    "41b3de4355555555": "333333333.3333333",
    "41b3de4355555556": "333333333.3333334",
    "41b3de4355555557": "333333333.33333343",
    "becbf647612f3696": "-0.0000033333333333333333",
    "43143ff3c1cb0959": "1424953923781206.2",
}


@pytest.mark.parametrize("bits", sorted(NUMBERS))
def test_numbers_are_written_as_rfc_8785s_appendix_b(bits: str) -> None:
    x = struct.unpack(">d", bytes.fromhex(bits))[0]
    assert V.es_number(x) == NUMBERS[bits]


def test_rfc_8785s_example_and_its_key_order() -> None:
    value = {
        "numbers": [333333333.33333329, 1e30, 4.50, 2e-3, 0.000000000000000000000000001],
        "string": "\u20ac$\u000f\u000aA'\u0042\u0022\u005c\\\"/",
        "literals": [None, True, False],
    }
    want = '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
    want += '"string":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
    assert V.canonical(value) == want.encode()
    keys = ["\u20ac", "\r", "\ufb33", "1", "\U0001f600", "\u0080", "\u00f6"]
    assert sorted(keys, key=V.utf16_order) == ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001f600", "\ufb33"]


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(exclude_categories=("Cs",))),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=400, deadline=None)
@given(JSON_VALUES)
def test_canonical_json_is_the_rfc8785_packages(value: Any) -> None:
    assert V.canonical(value) == rfc8785.dumps(value)


@settings(max_examples=2000, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_every_double_is_written_as_the_rfc8785_package_writes_it(x: float) -> None:
    assert V.canonical(x) == rfc8785.dumps(x)


@pytest.mark.parametrize("value", [2**53, float("nan"), "\ud800", {1: "not a string key"}])
def test_what_canonical_json_cannot_hold_is_refused(value: Any) -> None:
    with pytest.raises(ValueError):
        V.canonical(value)


# --- Merkle paths, RFC 9162 inclusion, signed notes -------------------------------------------


@pytest.mark.parametrize("index", sorted(INCLUSION))
def test_inclusion_on_certificate_transparencys_reference_vectors(index: int) -> None:
    proof = [bytes.fromhex(h) for h in INCLUSION[index]]
    assert V.inclusion_root(LEAVES[index], index, 8, proof) == bytes.fromhex(ROOTS[7])
    assert V.inclusion_root(LEAVES[index], index ^ 1, 8, proof) != bytes.fromhex(ROOTS[7])


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.data())
def test_inclusion_agrees_with_toolgates_log_tree(size: int, data: st.DataObject) -> None:
    leaves = [bytes([i]) * 32 for i in range(size)]
    index = data.draw(st.integers(0, size - 1))
    tree = Known(CompactRange(0), leaves)
    assert V.inclusion_root(leaves[index], index, size, tree.inclusion(index)) == tree.root()


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 13])
def test_merkle_paths_lead_to_toolgates_roots(size: int) -> None:
    messages = [f"record {i}".encode() for i in range(size)]
    root, proofs = merkle_tree([leaf_hash(m) for m in messages])
    for message, proof in zip(messages, proofs, strict=True):
        assert V.path_root(V.leaf_hash(message), proof) == root
    with pytest.raises(V.Failed):
        V.path_root(V.leaf_hash(messages[0]), b"X" + bytes(32))


def test_signed_notes_and_cosignatures_as_toolgate_makes_them() -> None:
    key, witness = PrivateKey(bytes([6]) * 32), PrivateKey(bytes([7]) * 32)
    note = sign("log.example\n3\n" + base64.b64encode(bytes(32)).decode() + "\n", "log.example", key)
    note = note.with_lines(cosign(note.text, "w.example", witness, 1_700_000_000).line())
    parsed = V.parse_note(str(note))
    assert V.note_signed(parsed, "log.example", key.public.raw)
    assert not V.note_signed(parsed, "log.example", witness.public.raw)
    assert V.cosigned(parsed, "w.example", witness.public.raw) is True
    assert V.cosigned(parsed, "other.example", witness.public.raw) is None
    assert V.parse_vkey(vkey("w.example", COSIGNATURE_V1, witness.public.raw)) == (
        "w.example",
        COSIGNATURE_V1,
        witness.public.raw,
    )


# --- Independence ---------------------------------------------------------------------------


def test_it_imports_the_standard_library_and_cryptography_only() -> None:
    imported, own = set(), {path.stem for path in MODULES}
    for path in MODULES:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level:
                assert (node.module or "").split(".")[0] in own | {""}, (path, node.module)
            elif isinstance(node, ast.ImportFrom):
                assert node.module
                imported.add(node.module.split(".")[0])
    assert imported - sys.stdlib_module_names == {"cryptography", "toolgate_evidence"}


def test_it_runs_with_nothing_of_toolgate_importable(tmp_path: Path) -> None:
    """`python -S` (no site-packages, no editable toolgate) with a PYTHONPATH holding only
    `cryptography` and what it needs (cffi, pycparser), from outside the repository."""
    for name in ("cryptography", "cffi", "pycparser"):
        for file in distribution(name).files or []:
            top = file.parts[0]
            if top != ".." and not top.endswith((".dist-info", ".data")) and not (tmp_path / top).exists():
                (tmp_path / top).symlink_to(Path(str(file.locate())).parents[len(file.parts) - 1] / top)
    probe = "import toolgate\n"
    env = {"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"}
    blocked = subprocess.run(
        [sys.executable, "-S", "-c", probe], env=env, cwd=tmp_path, capture_output=True, check=False
    )
    assert blocked.returncode != 0, "toolgate must not be importable in the isolated run"
    args = [sys.executable, "-S", str(SCRIPT), str(VECTORS / "approved" / "bundle.json"), "--json"]
    done = subprocess.run(args, env=env, cwd=tmp_path, capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["ok"] is True


def test_the_verifier_keeps_the_houses_sizes() -> None:
    """The house's rules (tests/unit/test_house.py) for a package an auditor reads in an hour: no
    module over 300 lines, no function over 60."""
    too_long = [
        f"{p.name} ({n} lines)" for p in MODULES if (n := len(p.read_text(encoding="utf-8").splitlines())) > 300
    ]
    long = [
        f"{path.name}: {node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for path in MODULES
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.FunctionDef) and node.end_lineno and node.end_lineno - node.lineno >= 60
    ]
    assert too_long == [] and long == []


def test_a_null_input_skips_its_check_and_never_passes_it() -> None:
    bundle = read(VECTORS / "approved" / "bundle.json")
    bundle["proposal"]["arguments"] = None
    statuses = {c["name"]: c["status"] for c in V.verify(bundle)["checks"]}
    assert statuses["proposal.arguments"] == statuses["call.payload_hash"] == "skipped"
    assert statuses["proposal.signature"] == "ok"


def test_a_decision_stored_unsigned_is_neither_counted_nor_failed() -> None:
    """docs/evidence.md: a decision with null signed bytes (a row from before 0036) is not counted
    and not failed; when none of the ticket's is signed, the three approval checks are skipped."""
    bundle = read(VECTORS / "approved" / "bundle.json")
    bundle["approval"]["decisions"][0]["signed"] = None
    statuses = {c["name"]: c["status"] for c in V.verify(bundle)["checks"]}
    assert statuses["approval.signatures"] == statuses["approval.state_version"] == "ok"
    assert statuses["approval.quorum"] == "failed"  # bob's alone: 1 of 2
    bundle["approval"]["decisions"][1]["signature"] = None
    statuses = {c["name"]: c["status"] for c in V.verify(bundle)["checks"]}
    assert {statuses[n] for n in ("approval.signatures", "approval.state_version", "approval.quorum")} == {"skipped"}


@pytest.mark.parametrize("name", NAMES)
def test_toolgates_own_verifier_gives_the_same_statuses(name: str) -> None:
    """The issue's acceptance: both verifiers name the same checks with the same statuses on the
    same bundles (toolgate's, `toolgate evidence verify`, once it is in the tree)."""
    if importlib.util.find_spec("toolgate.ops.evidence_checks") is None:
        pytest.skip("toolgate evidence verify is not in this tree")
    run = importlib.import_module("toolgate.ops.evidence_checks.run")
    trust = importlib.import_module("toolgate.ops.evidence_checks.trust")
    bundle = read(VECTORS / name / "bundle.json")
    theirs = run.verify(bundle, trust.trust_of(bundle)).as_json()
    ours = V.verify(bundle)
    assert [(c["name"], c["status"]) for c in theirs["checks"]] == [(c["name"], c["status"]) for c in ours["checks"]]
    assert theirs["ok"] is ours["ok"]


def test_the_text_verdict_is_one_line_per_check_and_says_when_keys_are_the_bundles_own(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert V.main([str(VECTORS / "tampered-state-version" / "bundle.json")]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(V.CHECKS) + 1 and lines[-1].startswith("note: keys not pinned")
    assert "FAILED   approval.state_version: decision d-1 signs another state version than the ticket's" in lines
    bundle = read(VECTORS / "approved" / "bundle.json")
    pins = ["--deployment-key", bundle["keys"]["deployment"][0]["public_key"]]
    pins += ["--witness-vkey", bundle["keys"]["witnesses"][0]["vkey"]]
    assert V.main([str(VECTORS / "approved" / "bundle.json"), *pins]) == 0
    assert len(capsys.readouterr().out.splitlines()) == len(V.CHECKS)
