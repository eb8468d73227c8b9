"""The witness and the insider of the audit log's tests (tests/integration/test_audit_witness.py,
tests/e2e/test_audit_witness.py): `toolgate witness serve` in a process of its own, and what an
insider with the tables' owner role and the deployment key can do to the log."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import psycopg

from toolgate.ops.stack.processes import port_free
from toolgate.settings import Settings
from toolgate.store import audit, audit_tree
from toolgate.store.audit import GENESIS, VERIFY, Entry, chain_hash, checkpoint_bytes
from toolgate.trust.integrity import deployment_keys
from toolgate.trust.log_tree import CompactRange
from toolgate.trust.signed_note import sign
from toolgate.trust.tlog_checkpoint import TreeHead

WITNESS_CLI = [sys.executable, "-m", "toolgate.cli", "witness"]


def keygen(key: Path, name: str) -> str:
    """A new witness key at `key`; its verifier key."""
    made = subprocess.run([*WITNESS_CLI, "keygen", "--key", str(key), "--name", name], capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    return made.stdout.strip()


class WitnessProcess:
    """`toolgate witness serve` in a process of its own, on loopback."""

    def __init__(self, command: list[str], port: int, said: Path) -> None:
        self.command, self.port, self.said = command, port, said
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.said, "a") as said:
            self.process = subprocess.Popen(self.command, stdout=subprocess.DEVNULL, stderr=said)
        deadline = time.monotonic() + 30
        while port_free(self.port) and self.process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not port_free(self.port), self.said.read_text()

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)
            self.process = None


def serving(key: Path, state: Path, name: str, log_key: str, origin: str, port: int) -> list[str]:
    """The command line of a witness of the log of `origin`."""
    serve = [*WITNESS_CLI, "serve", "--key", str(key), "--state", str(state)]  # its name: the key's .vkey's
    assert name == (key.parent / f"{key.name}.vkey").read_text().split("+")[0]
    return [*serve, "--log-key", log_key, "--origin", origin, "--port", str(port)]


def rewrite_tail(settings: Settings, origin: str, position: int) -> None:
    """What an insider with the owner's role and the deployment key can do: edit the row at
    `position` (1 = first), chain every row after it again, sign the per-append checkpoints and
    the tree heads again, and delete what the witnesses answered; holding the writers' and the
    tree heads' locks, so that no append or head comes between."""
    key = deployment_keys(settings).signing_key
    key_id = deployment_keys(settings).key_id
    tables = ("audit_log", "audit_heads", "audit_tree_heads", "audit_cosignatures")
    with psycopg.connect(settings.database_url) as conn:
        for lock in (audit.LOCK_ID, audit_tree.LOCK_ID):
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock,))
        for table in tables:
            conn.execute(f"ALTER TABLE toolgate.{table} DISABLE TRIGGER USER")
        rows = conn.execute(VERIFY).fetchall()
        prev, hashes = GENESIS, []
        for n, (row_id, at, stage, action, actor, call_id, tenant, detail, _, _) in enumerate(rows, 1):
            if n == position:
                detail = {**detail, "n": "rewritten"}
            digest = chain_hash(prev, at, Entry(stage, action, actor, call_id, tenant, detail))
            conn.execute(
                "UPDATE toolgate.audit_log SET detail = %s, prev_hash = %s, hash = %s WHERE id = %s",
                (json.dumps(detail), prev, digest, row_id),
            )
            prev = digest
            hashes.append(bytes.fromhex(digest))
        conn.execute("DELETE FROM toolgate.audit_heads")
        for n, digest in enumerate(hashes, 1):
            signature = key.sign(checkpoint_bytes(n, digest.hex()))
            conn.execute(
                "INSERT INTO toolgate.audit_heads (row_count, head_hash, signature, key_id) VALUES (%s, %s, %s, %s)",
                (n, digest.hex(), signature, key_id),
            )
        conn.execute("DELETE FROM toolgate.audit_cosignatures")
        for head_id, size in conn.execute("SELECT id, tree_size FROM toolgate.audit_tree_heads").fetchall():
            tree = CompactRange(0).extend(hashes[:size])
            note = sign(TreeHead(origin, size, tree.root()).text(), origin, key)
            conn.execute(
                "UPDATE toolgate.audit_tree_heads SET root_hash = %s, compact_range = %s, note = %s WHERE id = %s",
                (tree.root(), tree.to_bytes(), str(note), head_id),
            )
        for table in tables:
            conn.execute(f"ALTER TABLE toolgate.{table} ENABLE TRIGGER USER")
