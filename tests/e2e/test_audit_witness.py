"""A `toolgate up` whose reconciliation worker sends its audit tree heads to a witness (issue 53,
part 3): the running worker has each head cosigned; after an insider with the owner's role and
the deployment key rewrites the tail (tests/audit_insider.py), the chain still verifies intact
with the deployment key, the witness refuses what the worker sends it next, the refusal is stored
and audited, and `audit verify` with the witness's state reports the rewrite."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from toolgate.ops.stack.processes import free_port
from toolgate.settings import Settings

from ..audit_insider import WitnessProcess, keygen, rewrite_tail, serving
from ..conftest import Pipeline, eventually, started
from .test_audit_anchor import audited_refusal

pytestmark = pytest.mark.timeout(420)

ORIGIN = "toolgate.e2e/audit"
WITNESS = "witness.e2e/w1"


@dataclass(frozen=True)
class Witnessed:
    pipeline: Pipeline
    state: Path


@pytest.fixture(scope="module")
def witnessed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Witnessed]:
    home, elsewhere = tmp_path_factory.mktemp("witnessed-home"), tmp_path_factory.mktemp("witness")
    verifier, port = keygen(elsewhere / "w.pem", WITNESS), free_port()
    witnesses = json.dumps([{"name": WITNESS, "url": f"http://127.0.0.1:{port}", "public_key": verifier}])
    overrides = {"TOOLGATE_AUDIT_WITNESSES": witnesses, "TOOLGATE_AUDIT_ORIGIN": ORIGIN}
    with started(home, partitions=2, TOOLGATE_AUDIT_TREE_SECONDS="1", **overrides) as pipeline:
        # The witness learns the deployment's public key once `toolgate up` made it.
        log_key = pipeline.runtime["deployment_public_key"].split(",")[0]
        serve = serving(elsewhere / "w.pem", elsewhere / "state", WITNESS, log_key, ORIGIN, port)
        witness = WitnessProcess(serve, port, elsewhere / "witness.log")
        witness.start()
        try:
            yield Witnessed(pipeline, elsewhere / "state")
        finally:
            witness.stop()


def answers(pipeline: Pipeline) -> list[tuple[int, str, int]]:
    with psycopg.connect(pipeline.database_url) as conn:
        return conn.execute(
            "SELECT h.tree_size, c.outcome, c.status FROM toolgate.audit_cosignatures c "
            "JOIN toolgate.audit_tree_heads h ON h.id = c.head_id ORDER BY c.id"
        ).fetchall()


def rows(pipeline: Pipeline) -> int:
    with psycopg.connect(pipeline.database_url) as conn:
        return int(conn.execute("SELECT count(*) FROM toolgate.audit_log").fetchall()[0][0])


def verify(pipeline: Pipeline, *args: str) -> tuple[int, dict[str, object]]:
    done = subprocess.run(
        [sys.executable, "-m", "toolgate.cli", "audit", "verify", "--json", *args],
        env=pipeline.env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    return done.returncode, json.loads(done.stdout)


def test_the_running_worker_has_heads_cosigned_and_the_witness_catches_a_rewrite(witnessed: Witnessed) -> None:
    pipeline = witnessed.pipeline
    audited_refusal(pipeline)
    grown = rows(pipeline)
    eventually(lambda: any(size >= grown and outcome == "cosigned" for size, outcome, _ in answers(pipeline)), 60)
    code, said = verify(pipeline)
    assert code == 0 and said["tree"]["cosigned"] >= 1, said  # type: ignore[index]

    settings = Settings(database_url=pipeline.database_url, home=pipeline.home)
    rewrite_tail(settings, ORIGIN, position=grown)  # a row under the head the witness cosigned
    code, said = verify(pipeline)
    assert said["verdict"] == "intact", said  # the chain, with only the deployment key

    audited_refusal(pipeline)  # the worker sends the next head; the witness refuses it
    refused = eventually(lambda: [a for a in answers(pipeline) if a[1] == "refused"], 60)
    assert {status for _, _, status in refused} <= {409, 422}, refused
    code, said = verify(pipeline, "--witness-checkpoint", str(witnessed.state))
    assert code == 1 and said["tree"]["rewritten"], said  # type: ignore[index]
    assert any("no longer hash to that root: rewritten" in line for line in said["said"]), said  # type: ignore[union-attr]
    with psycopg.connect(pipeline.database_url) as conn:
        [(audited,)] = conn.execute(
            "SELECT count(*) FROM toolgate.audit_log WHERE action = 'witness_refused'"
        ).fetchall()
    assert audited >= 1
