"""A rewritten audit tail is caught by a witness (issue 53, part 3), end to end through the real
Postgres and a real `toolgate witness serve` process over HTTP on loopback.

The log is checkpointed as the reconciliation worker's timer does it (`TreeHeads.run_once`) and
each tree head cosigned by the witness. Then an insider holding the deployment key and the tables'
owner role rewrites a row of the tail: past the append-only trigger, the row edited, every chain
hash after it recomputed, the per-append checkpoints and the tree heads signed again with the
deployment key, the witnesses' answers deleted. The database then agrees with itself, and
`toolgate audit verify` with only the deployment key says the chain is intact. The witness does
not: it refuses the rewritten tree head, and `audit verify --witness-checkpoint` with the
checkpoint it cosigned reports the rewrite.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import psycopg
import pytest

from toolgate.ops.audit import verify_log
from toolgate.ops.stack.processes import free_port
from toolgate.ops.witness import origin_id
from toolgate.settings import Settings
from toolgate.store import audit
from toolgate.store.audit import Entry, Verdict
from toolgate.trust.checkpoint_keys import use_key
from toolgate.trust.ed25519 import PrivateKey, PublicKey
from toolgate.trust.integrity import deployment_keys
from toolgate.trust.log_tree import CompactRange
from toolgate.trust.signed_note import cosigned_at, parse, sign
from toolgate.trust.tlog_checkpoint import AddCheckpoint, TreeHead
from toolgate.trust.witness_keys import witnesses_of
from toolgate.workers.reconciliation.tree_heads import SIZE_TYPE, TreeHeads

from ..audit_insider import WitnessProcess, keygen, rewrite_tail, serving
from .conftest import Database, Server

pytestmark = pytest.mark.timeout(180)

ORIGIN = "toolgate.test/audit"
WITNESS = "witness.test/w1"


@dataclass(frozen=True)
class Deployment:
    settings: Settings
    state: Path
    env: dict[str, str]
    witness: WitnessProcess


@pytest.fixture
def deployment(postgres: Server, tmp_path: Path) -> Iterator[Deployment]:
    """A database with the deployment's key, and a witness of its audit log in a process of its own."""
    with postgres.scratch("witness") as database:
        yield from _with_witness(database, tmp_path)


def _with_witness(database: Database, tmp_path: Path) -> Iterator[Deployment]:
    keys = deployment_keys(database.settings)
    use_key(keys.signing_key)
    verifier = keygen(tmp_path / "w.pem", WITNESS)
    port, state = free_port(), tmp_path / "state"
    serve = serving(tmp_path / "w.pem", state, WITNESS, keys.public_key.hex(), ORIGIN, port)
    witness = WitnessProcess(serve, port, tmp_path / "witness.log")
    witness.start()
    try:
        witnesses = json.dumps([{"name": WITNESS, "url": f"http://127.0.0.1:{port}", "public_key": verifier}])
        settings = replace(database.settings, audit_origin=ORIGIN, audit_witnesses=witnesses)
        env = {
            **os.environ,
            "TOOLGATE_HOME": str(database.home),
            "TOOLGATE_DATABASE_URL": database.database_url,
            "TOOLGATE_KAFKA_BOOTSTRAP": "127.0.0.1:9",  # `audit verify` reads no topic
            "TOOLGATE_AUDIT_ORIGIN": ORIGIN,
            "TOOLGATE_AUDIT_WITNESSES": witnesses,
            "COLUMNS": "1000",
        }
        yield Deployment(settings, state, env, witness)
    finally:
        witness.stop()


TEXT: dict[str, Any] = {"capture_output": True, "text": True, "timeout": 60}


def append(settings: Settings, count: int) -> None:
    async def write() -> None:
        async with await psycopg.AsyncConnection.connect(settings.database_url) as conn, conn.transaction():
            entries = [Entry("reconciliation", "tested", "pytest", detail={"n": n}) for n in range(count)]
            await audit.append(conn, entries)

    asyncio.run(write())


def take_head(settings: Settings) -> None:
    """One round of the reconciliation worker's timer: a tree head, sent to the witness."""

    async def once() -> None:
        heads = TreeHeads(settings)
        try:
            await heads.run_once()
        finally:
            await heads.close()

    asyncio.run(once())


def answers(settings: Settings) -> list[tuple[int, str, int]]:
    with psycopg.connect(settings.database_url) as conn:
        return conn.execute(
            "SELECT h.tree_size, c.outcome, c.status FROM toolgate.audit_cosignatures c "
            "JOIN toolgate.audit_tree_heads h ON h.id = c.head_id ORDER BY c.id"
        ).fetchall()


def verify(deployment: Deployment, *args: str) -> tuple[int, str]:
    done = subprocess.run([sys.executable, "-m", "toolgate.cli", "audit", "verify", *args], env=deployment.env, **TEXT)
    return done.returncode, done.stdout + done.stderr


def test_a_rewritten_tail_passes_the_deployment_key_but_not_the_witness(deployment: Deployment) -> None:
    settings = deployment.settings
    with psycopg.connect(settings.database_url) as conn:
        [(base,)] = conn.execute("SELECT count(*) FROM toolgate.audit_log").fetchall()  # the template's
    append(settings, 5)
    take_head(settings)
    append(settings, 4)
    take_head(settings)  # cosigned with a consistency proof from the first head
    assert answers(settings) == [(base + 5, "cosigned", 200), (base + 9, "cosigned", 200)]
    code, said = verify(deployment)
    assert code == 0 and f"audit chain intact: {base + 9} rows" in said, said
    assert "2 signed tree head(s), 2 cosigned by a witness" in said, said
    witnessed = deployment.state / f"{origin_id(ORIGIN)}.checkpoint"
    assert verify(deployment, "--witness-checkpoint", str(witnessed))[0] == 0

    rewrite_tail(settings, ORIGIN, position=base + 7)

    assert verify_log(settings).verdict is Verdict.INTACT  # the chain with only the deployment key
    code, said = verify(deployment)
    assert code == 0 and f"audit chain intact: {base + 9} rows" in said, said  # the database agrees with itself
    assert "2 tree head(s) no witness cosigned" in said, said

    deployment.witness.stop()  # what it cosigned outlives it
    deployment.witness.start()
    append(settings, 1)
    take_head(settings)  # the witness is asked from the size it holds, whose root it knows
    assert answers(settings) == [(base + 10, "refused", 422)]
    held = json.loads((deployment.state / f"{origin_id(ORIGIN)}.json").read_text())
    assert held["size"] == base + 9  # it kept what it cosigned
    code, said = verify(deployment)
    assert code == 1 and f"witness {WITNESS} refused it (422" in said, said
    code, said = verify(deployment, "--witness-checkpoint", str(deployment.state))  # its state, whole
    assert code == 1, said
    assert f"witness {WITNESS} cosigned size {base + 9}" in said, said
    assert "no longer hash to that root: rewritten" in said, said
    with psycopg.connect(settings.database_url) as conn:
        [(refusals,)] = conn.execute(
            "SELECT count(*) FROM toolgate.audit_log WHERE action = 'witness_refused'"
        ).fetchall()
    assert refusals == 1


def test_a_cosignature_whose_answer_was_lost_is_asked_for_again(deployment: Deployment) -> None:
    """The witness holds a size this log has no cosignature of (the answer was lost): it answers
    409 with its size, and the log asks again from its head of that size."""
    settings = deployment.settings
    append(settings, 3)
    take_head(settings)
    first = answers(settings)
    forget_answers(settings)
    take_head(settings)  # no new rows: the same head, from size 0; the witness holds its size
    assert answers(settings) == first
    forget_answers(settings)
    append(settings, 2)
    take_head(settings)  # a new head, from size 0; the witness holds the last one's size
    assert [outcome for _, outcome, _ in answers(settings)] == ["cosigned"]
    assert answers(settings)[0][0] == first[0][0] + 2


def forget_answers(settings: Settings) -> None:
    with psycopg.connect(settings.database_url) as conn:
        conn.execute("ALTER TABLE toolgate.audit_cosignatures DISABLE TRIGGER USER")
        conn.execute("DELETE FROM toolgate.audit_cosignatures")
        conn.execute("ALTER TABLE toolgate.audit_cosignatures ENABLE TRIGGER USER")


def test_the_witness_answers_as_tlog_witness_says(deployment: Deployment) -> None:
    settings = deployment.settings
    append(settings, 4)
    take_head(settings)
    [(size, _, _)] = answers(settings)
    url = json.loads(settings.audit_witnesses)[0]["url"] + "/add-checkpoint"
    key = deployment_keys(settings).signing_key
    with psycopg.connect(settings.database_url) as conn:
        hashes = [bytes.fromhex(h) for (h,) in conn.execute("SELECT hash FROM toolgate.audit_log ORDER BY id")]
    tree = CompactRange(0).extend(hashes[:size])
    note = str(sign(TreeHead(ORIGIN, size, tree.root()).text(), ORIGIN, key))
    assert post(url, AddCheckpoint(0, (), note).body()) == (409, SIZE_TYPE, f"{size}\n")
    forked = str(sign(TreeHead(ORIGIN, size, bytes(32)).text(), ORIGIN, key))
    assert post(url, AddCheckpoint(size, (), forked).body())[0] == 409
    assert post(url, AddCheckpoint(size, (), note.replace(ORIGIN, "other/log")).body())[0] == 404
    stranger = str(sign(TreeHead(ORIGIN, size, tree.root()).text(), ORIGIN, PrivateKey(b"\x07" * 32)))
    assert post(url, AddCheckpoint(size, (), stranger).body())[0] == 403
    assert post(url, "old 1\n")[0] == 400
    second = subprocess.run([*deployment.witness.command[:-1], str(free_port())], **TEXT)
    assert second.returncode != 0 and "another witness runs on" in second.stderr  # one per state
    status, _, line = post(url, AddCheckpoint(size, (), note).body())  # the same head: cosigned again
    assert status == 200 and cosigned_at(parse(note).with_lines(line), WITNESS, witness_key(settings)) is not None


def post(url: str, body: str) -> tuple[int, str, str]:
    request = urllib.request.Request(url, data=body.encode(), method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.headers.get_content_type(), answer.read().decode()
    except urllib.error.HTTPError as refused:
        with refused:
            return refused.code, refused.headers.get_content_type(), refused.read().decode()


def witness_key(settings: Settings) -> PublicKey:
    return witnesses_of(settings.audit_witnesses)[0].key


def test_a_refusal_that_a_later_cosignature_settles_is_said_not_failed(deployment: Deployment) -> None:
    """A witness that refused a head for a time (here: told another origin) and cosigned a larger
    one since holds the log to the same account: audit verify says so, and passes."""
    settings, witness = deployment.settings, deployment.witness
    append(settings, 2)
    take_head(settings)
    right = list(witness.command)
    at = right.index("--origin") + 1
    witness.stop()
    witness.command = [*right[:at], "other/log", *right[at + 1 :]]
    witness.start()
    append(settings, 1)
    take_head(settings)
    assert [status for _, _, status in answers(settings)] == [200, 404]
    code, said = verify(deployment)
    assert code == 1 and f"witness {WITNESS} refused it (404" in said, said
    witness.stop()
    witness.command = right
    witness.start()
    append(settings, 1)
    take_head(settings)
    assert [status for _, _, status in answers(settings)] == [200, 404, 200]
    code, said = verify(deployment)
    assert code == 0 and "1 refusal(s) by a witness that later cosigned a head as large" in said, said


def test_a_cosignature_by_another_key_than_the_witness_is_not_kept(deployment: Deployment) -> None:
    settings = deployment.settings
    [configured] = json.loads(settings.audit_witnesses)
    stranger = PrivateKey(b"\x0b" * 32).public.raw.hex()
    settings = replace(settings, audit_witnesses=json.dumps([{**configured, "public_key": stranger}]))
    append(settings, 2)
    take_head(settings)
    [(_, outcome, status)] = answers(settings)
    assert (outcome, status) == ("refused", 200)
    with psycopg.connect(settings.database_url) as conn:
        [(answer,)] = conn.execute("SELECT answer FROM toolgate.audit_cosignatures").fetchall()
    assert answer.startswith("no cosignature that verifies with its key: \u2014 " + WITNESS)
