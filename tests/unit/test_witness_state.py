"""What a witness keeps (ops/witness.py `State`, `keygen`, `name_of`) and how a deployment reads a
witness's answer (workers/reconciliation/tree_heads.py `cosignature_of`)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from toolgate.ops.witness import State, keygen, load_key, name_of, origin_id
from toolgate.ops.witness_judge import Cosign
from toolgate.store.audit_tree import Head
from toolgate.trust.ed25519 import PrivateKey
from toolgate.trust.signed_note import cosign, sign
from toolgate.trust.tlog_checkpoint import TreeHead
from toolgate.trust.witness_keys import WitnessKey
from toolgate.workers.reconciliation.tree_heads import cosignature_of

LOG = PrivateKey(b"\x01" * 32)
HEAD = TreeHead("toolgate/audit", 7, b"\x07" * 32)


def test_a_state_keeps_the_size_and_root_and_the_cosigned_checkpoint(tmp_path: Path) -> None:
    state = State(tmp_path)
    assert state.held(HEAD.origin) is None
    note = sign(HEAD.text(), HEAD.origin, LOG)
    state.keep(Cosign(HEAD, note), "the cosigned note\n")
    assert state.held(HEAD.origin) == TreeHead(HEAD.origin, 7, b"\x07" * 32)
    kept = json.loads((tmp_path / f"{origin_id(HEAD.origin)}.json").read_text())
    assert kept == {"origin": HEAD.origin, "size": 7, "root": base64.b64encode(b"\x07" * 32).decode()}
    assert (tmp_path / f"{origin_id(HEAD.origin)}.checkpoint").read_text() == "the cosigned note\n"
    assert not list(tmp_path.glob("*.tmp"))
    state.close()


def test_one_witness_per_state_directory(tmp_path: Path) -> None:
    first = State(tmp_path)
    with pytest.raises(SystemExit, match="another witness runs"):
        State(tmp_path)
    first.close()
    State(tmp_path).close()  # free again once the first is gone


def test_a_key_names_its_witness_through_its_verifier_key(tmp_path: Path) -> None:
    verifier = keygen(tmp_path / "w.pem", "witness.example/w1")
    assert (tmp_path / "w.pem").stat().st_mode & 0o077 == 0
    assert name_of(tmp_path / "w.pem", load_key(tmp_path / "w.pem")) == "witness.example/w1"
    keygen(tmp_path / "other.pem", "witness.example/w2")
    (tmp_path / "w.pem.vkey").write_text((tmp_path / "other.pem.vkey").read_text())
    with pytest.raises(ValueError, match="is not the verifier key"):
        name_of(tmp_path / "w.pem", load_key(tmp_path / "w.pem"))
    assert verifier.startswith("witness.example/w1+")


def test_a_deployment_keeps_only_a_cosignature_that_verifies() -> None:
    witness_key = PrivateKey(b"\x02" * 32)
    note = sign(HEAD.text(), HEAD.origin, LOG)
    head = Head(1, HEAD.size, HEAD.root, 7, b"", str(note), "dk_x")
    witness = WitnessKey("w1", "http://127.0.0.1:1", witness_key.public)
    line = cosign(note.text, "w1", witness_key, 1_800_000_000).line()
    assert cosignature_of(witness, head, line) == line
    assert cosignature_of(witness, head, cosign(note.text, "w1", LOG, 1_800_000_000).line()) is None
    other = sign(TreeHead(HEAD.origin, 8, HEAD.root).text(), HEAD.origin, LOG)
    assert cosignature_of(witness, head, cosign(other.text, "w1", witness_key, 1).line()) is None
    assert cosignature_of(witness, head, "not a signature line\n") is None
