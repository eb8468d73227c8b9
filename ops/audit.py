"""`toolgate audit verify`: the audit log against its newest signed checkpoint.

Reads the log and its checkpoints in one read-only snapshot (an append writes its rows and its
checkpoint in one transaction, so a snapshot never sees one without the other), each through a
server-side cursor, and lets `workers.runtime.audit.verify` judge them as they stream by: the
reconciliation worker verifies the whole log every TOOLGATE_AUDIT_VERIFY_SECONDS, and its memory
must not grow with the log (it held every row once). The checkpoints are checked with the
deployment's public keys only, so anyone holding them can audit: each with the key it names,
among those the operator trusts (`TOOLGATE_DEPLOYMENT_PUBLIC_KEY`, several separated by commas;
those the runtime file of `toolgate up` lists; on a host holding the deployment secret, every key
its keyset names, retired ones too). A rotation of the secret leaves the chain verifiable: the
retired keys' public halves stay known.
"""

from __future__ import annotations

from collections.abc import Generator
from contextlib import closing
from dataclasses import asdict
from typing import Any

import psycopg

from toolgate.settings import Settings
from toolgate.store.audit import CHECKPOINTS, VERIFY, Checkpoint, Report, Verdict, verify
from toolgate.trust.checkpoint_keys import trusted_keys as trusted_keys

ROWS_AT_ONCE = 2000  # rows fetched per round trip of the server-side cursor
CHECKPOINTS_AT_ONCE = 256


def verify_log(settings: Settings) -> Report:
    """The whole log against its checkpoints, streamed: at most ROWS_AT_ONCE rows (and
    CHECKPOINTS_AT_ONCE checkpoints) are held at a time, however long the log is."""
    key = trusted_keys(settings)
    with psycopg.connect(settings.database_url) as conn:
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        conn.read_only = True
        with closing(_rows(conn)) as rows, closing(_checkpoints(conn)) as checkpoints:
            return verify(rows, checkpoints, key)


def _rows(conn: psycopg.Connection[Any]) -> Generator[tuple[Any, ...], None, None]:
    with conn.cursor(name="audit_rows") as cur:
        cur.itersize = ROWS_AT_ONCE
        cur.execute(VERIFY)
        yield from cur


def _checkpoints(conn: psycopg.Connection[Any]) -> Generator[tuple[Checkpoint, int | None], None, None]:
    """Each checkpoint, newest first, with the position of the row holding its head: read once
    the rows were (the generator runs its query when first asked), in the same snapshot."""
    with conn.cursor(name="audit_checkpoints") as cur:
        cur.itersize = CHECKPOINTS_AT_ONCE
        cur.execute(CHECKPOINTS)
        for *fields, position in cur:
            yield Checkpoint(*fields), position


def describe(report: Report) -> list[str]:
    """What an operator reads: the verdict first, then what it rests on."""
    a, v = report.anchor, report.violated
    if report.verdict is Verdict.BROKEN:
        first = f"audit chain broken at row {report.broken_at} (after {report.checked} good rows)"
    elif v is not None and report.verdict is Verdict.CUT:
        first = (
            f"audit log cut: signed checkpoint #{v.id} of {v.at} counts {v.row_count} rows ending in "
            f"{v.head_hash[:16]}..., which the log ({report.rows} rows) no longer holds"
        )
        if v.row_count > report.rows:
            first += f": {v.row_count - report.rows} row(s) are missing from its end"
    elif v is not None:
        first = (
            f"audit log diverges from signed checkpoint #{v.id} of {v.at}: its head {v.head_hash[:16]}... "
            f"is no longer row {v.row_count}"
        )
    elif a is None:
        first = f"audit chain intact: {report.rows} rows, but no signed checkpoint, so a cut tail would not show"
    else:
        first = f"audit chain intact: {report.rows} rows; signed checkpoint #{a.id} of {a.at} covers {a.row_count}"
        first += f" (signed by {a.key_id})" if a.key_id else ""
    out = [first]
    if report.ok and a is not None and report.uncovered:
        out.append(f"{report.uncovered} newer row(s) not covered by a signed checkpoint")
    if report.unsigned:
        out.append(f"{report.unsigned} checkpoint(s) not signed by this deployment, ignored")
    return out


def checkpoint_json(checkpoint: Checkpoint | None) -> dict[str, Any] | None:
    """A signed checkpoint as JSON, its signature in hex."""
    return {**asdict(checkpoint), "signature": checkpoint.signature.hex()} if checkpoint else None
