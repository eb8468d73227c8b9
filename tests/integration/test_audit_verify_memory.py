"""`toolgate audit verify` streams the audit log: on a log of a million rows, in the real Postgres,
the memory verify_log holds stays under a fixed bound that does not grow with the log.

The log is filled as the writers chain it (store/audit.py: each row's hash is
sha256(previous hash || canonical JSON of the row), every row carries its position) but in one
COPY, with a signed checkpoint every CHECKPOINT_EVERY rows as appends leave them. verify_log runs
in a process of its own, and what it holds is that process's peak resident memory during the
call above what it held before (Linux's VmHWM, reset just before: /proc/self/clear_refs), never a
clock. tracemalloc would count Python's allocations more finely, but it slows the walk of a
million rows eight-fold (3.3 MiB at its peak for 200,000 rows, measured so). Before the log was
streamed, verify_log held every row at once (fetchall): on this log, about a gigabyte.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator

import psycopg
import pytest

from toolgate.schemas.wire import canonical_json
from toolgate.store.audit import GENESIS, TAIL, Entry, chain_hash, checkpoint_bytes
from toolgate.trust.integrity import deployment_keys

from .conftest import Database, Server

pytestmark = pytest.mark.timeout(600)

ROWS = 1_000_000
CHECKPOINT_EVERY = 1_000
AT = "2026-11-28T00:00:00.000000Z"  # as AT_TEXT gives a stored timestamp back
ENTRY = Entry("reconciliation", "filled", "pytest", None, None, {"why": "a long log"})
# What verify_log may hold at its peak, whatever the log's length: a server-side cursor's round
# trip of rows (ops/audit.ROWS_AT_ONCE) and of checkpoints, the hashing of one row, the allocator's
# slack.
PEAK_BOUND_KB = 64 * 1024
VERIFY_ALONE = """
import json, re, sys
from pathlib import Path
from toolgate.ops.audit import verify_log
from toolgate.settings import Settings

def status(field):
    return int(re.search(field + r":\\s+(\\d+) kB", Path("/proc/self/status").read_text()).group(1))

settings = Settings(database_url=sys.argv[1], home=Path(sys.argv[2]))
before = status("VmRSS")
Path("/proc/self/clear_refs").write_text("5")  # VmHWM from here on: the peak during the call
report = verify_log(settings)
print(json.dumps({"verdict": str(report.verdict), "rows": report.rows, "checked": report.checked,
                  "anchor": report.anchor.row_count if report.anchor else None,
                  "held_kb": status("VmHWM") - before}))
"""


@pytest.fixture(scope="module")
def long_log(postgres: Server) -> Iterator[Database]:
    with postgres.scratch("audit_million") as database:
        started = time.monotonic()
        fill(database, ROWS)
        print(f"\nfilled {ROWS:,} audit rows in {time.monotonic() - started:.1f} s")
        yield database


def fill(database: Database, rows: int) -> None:
    """Append `rows` rows after the log's tail, chained and checkpointed as appends chain them."""
    key = deployment_keys(database.settings).signing_key
    body = canonical_json(
        {
            "at": AT,
            "stage": ENTRY.stage,
            "action": ENTRY.action,
            "actor": ENTRY.actor,
            "call_id": ENTRY.call_id,
            "tenant_id": ENTRY.tenant_id,
            "detail": ENTRY.detail,
        }
    )
    detail = canonical_json(ENTRY.detail)
    heads: list[tuple[int, str, bytes]] = []
    with psycopg.connect(database.database_url) as conn:
        tail = conn.execute(TAIL).fetchone()
        assert tail is not None
        prev, count = str(tail[1] or GENESIS), int(tail[2])
        assert hashlib.sha256((prev + body).encode()).hexdigest() == chain_hash(prev, AT, ENTRY)  # the real chain
        columns = "at, stage, action, call_id, tenant_id, actor, detail, prev_hash, hash, seq"
        with conn.cursor().copy(f"COPY toolgate.audit_log ({columns}) FROM STDIN") as copy:
            for _ in range(rows):
                digest = hashlib.sha256((prev + body).encode()).hexdigest()
                count += 1
                copy.write_row((AT, ENTRY.stage, ENTRY.action, None, None, ENTRY.actor, detail, prev, digest, count))
                if count % CHECKPOINT_EVERY == 0:
                    heads.append((count, digest, key.sign(checkpoint_bytes(count, digest))))
                prev = digest
        heads.append((count, prev, key.sign(checkpoint_bytes(count, prev))))
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO toolgate.audit_heads (row_count, head_hash, signature) VALUES (%s, %s, %s)", heads
            )


def test_verify_holds_a_bounded_memory_on_a_log_of_a_million_rows(long_log: Database) -> None:
    total = int(long_log.sql("SELECT count(*) FROM toolgate.audit_log")[0][0])
    assert total >= ROWS
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", VERIFY_ALONE, long_log.database_url, str(long_log.home)],
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    held = report["held_kb"]
    print(f"\nverified {total:,} rows in {time.monotonic() - started:.1f} s; {held / 1024:.1f} MiB held at the peak")
    assert (report["verdict"], report["rows"], report["checked"], report["anchor"]) == ("intact", total, total, total)
    assert held < PEAK_BOUND_KB, f"verify held {held / 1024:.0f} MiB at its peak for {total:,} rows"
