"""`toolgate audit verify`, the tree's part: the audit log's Merkle tree recomputed over the chain,
against every stored tree head and what the witnesses answered (migration 0035).

In one read-only snapshot, the rows' chain hashes and the heads (in size order, each with the
witnesses' answers) stream by together, and a compact range is carried over the rows, so the memory
held does not grow with the log. Each head must hold the root and compact range of the log's first
`tree_size` rows, and carry the signature of a trusted deployment key under the log's origin:
heads that all do are consistent with each other, being prefixes of one log. Each cosignature is
checked with its witness's key (TOOLGATE_AUDIT_WITNESSES); a refusal is reported, and with
witnesses configured, so are the heads none of them cosigned.

None of that can catch an insider who holds the deployment key and rewrites the rows, the chain,
the per-append checkpoints, the heads, and deletes the answers: the database then agrees with
itself. A checkpoint a witness cosigned can (`--witness-checkpoint`, the witness's
`<id>.checkpoint` file): its cosignature is checked with the witness's key, and its root against
the log's first rows as they are now.
"""

from __future__ import annotations

import itertools
from collections.abc import Generator
from contextlib import closing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

from toolgate.ops.audit import trusted_keys
from toolgate.ops.witness import origin_id
from toolgate.settings import Settings
from toolgate.store.audit_tree import ALL_LEAVES, FIRST_LEAVES, HEADS_WITH_ANSWERS
from toolgate.trust.checkpoint_keys import TrustedKeys
from toolgate.trust.log_tree import CompactRange
from toolgate.trust.signed_note import Note, NoteError, cosigned_at, parse, signed_by
from toolgate.trust.tlog_checkpoint import TreeHead
from toolgate.trust.witness_keys import WitnessKey, witnesses_of

ROWS_AT_ONCE = 2000
SHOWN = 10  # problems of a kind named one by one; the rest counted


@dataclass
class TreeReport:
    heads: int = 0
    cosigned: int = 0
    problems: list[str] = field(default_factory=list)
    # By witness, its refusal that no cosignature of a head as large came after (the latest), and
    # how many refusals were followed by one (a witness unreachable or misconfigured for a time).
    refused: dict[str, str] = field(default_factory=dict)
    refusals_open: dict[str, int] = field(default_factory=dict)
    refusals_since_cosigned: int = 0
    uncosigned: int = 0
    uncosigned_sizes: list[int] = field(default_factory=list)  # the newest SHOWN of them
    witnessed: list[str] = field(default_factory=list)
    rewritten: bool = False

    @property
    def ok(self) -> bool:
        return not self.problems and not self.refused and not self.rewritten


def verify_tree(settings: Settings, witness_checkpoint: Path | None = None) -> TreeReport:
    report = TreeReport()
    keys, witnesses = trusted_keys(settings), witnesses_of(settings.audit_witnesses)
    with psycopg.connect(settings.database_url) as conn:
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        conn.read_only = True
        with (
            closing(_stream(conn, "tree_leaves", ALL_LEAVES)) as rows,
            closing(_stream(conn, "tree_heads", HEADS_WITH_ANSWERS)) as heads,
        ):
            leaves = (bytes.fromhex(row[0]) for row in rows)
            tree = CompactRange(0)
            for head in heads:
                tree = tree.extend(itertools.islice(leaves, int(head[1]) - tree.size))
                _check_head(report, head, tree, settings.audit_origin, keys, witnesses)
        if witness_checkpoint is not None:
            if witness_checkpoint.is_dir():  # the witness's state: its checkpoint of this log
                witness_checkpoint = witness_checkpoint / f"{origin_id(settings.audit_origin)}.checkpoint"
            _check_witnessed(report, conn, witness_checkpoint.read_text(), witnesses)
    return report


def _stream(
    conn: psycopg.Connection[Any], name: str, query: str, params: Any = None
) -> Generator[tuple[Any, ...], None, None]:
    with conn.cursor(name=name) as cur:
        cur.itersize = ROWS_AT_ONCE
        cur.execute(query, params)
        yield from cur


def _check_head(
    report: TreeReport,
    row: tuple[Any, ...],
    tree: CompactRange,
    origin: str,
    keys: TrustedKeys,
    witnesses: list[WitnessKey],
) -> None:
    head_id, size, root, _, compact, text, key_id, at, answers = row
    report.heads += 1
    name = f"tree head #{head_id} of {at} (size {size})"
    try:
        note = parse(text)
        claimed = TreeHead.parse(note.text)
    except NoteError as exc:
        return _problem(report, f"{name}: not a signed checkpoint ({exc})")
    key = keys.keys.get(key_id)
    if tree.size < size:
        return _problem(report, f"{name} counts {size} rows; the log holds {tree.size}: rows were cut")
    if claimed != TreeHead(origin, size, bytes(root)):
        _problem(report, f"{name}: its checkpoint names another origin, size or root than the head")
    elif key is None or not signed_by(note, origin, key):
        _problem(report, f"{name}: not signed by a trusted deployment key")
    elif bytes(root) != tree.root() or bytes(compact) != tree.to_bytes():
        _problem(report, f"{name}: the log's first {size} rows no longer hash to its root: rewritten")
    _check_answers(report, name, size, note, answers or [], witnesses)


def _check_answers(
    report: TreeReport, name: str, size: int, note: Note, answers: list[Any], witnesses: list[WitnessKey]
) -> None:
    by_name = {w.name: w for w in witnesses}
    cosigned = False
    for witness, outcome, line, status, answer in answers:
        if outcome == "refused":
            report.refused[witness] = f"{name}: witness {witness} refused it ({status}: {str(answer).strip()[:80]})"
            report.refusals_open[witness] = report.refusals_open.get(witness, 0) + 1
            continue
        known = by_name.get(witness)
        try:
            held = known is not None and cosigned_at(note.with_lines(line), witness, known.key) is not None
        except NoteError:
            held = False
        if held:
            cosigned = True
            report.refused.pop(witness, None)
            report.refusals_since_cosigned += report.refusals_open.pop(witness, 0)
        elif known is not None:
            _problem(report, f"{name}: the cosignature stored for witness {witness} does not verify")
    report.cosigned += cosigned
    if witnesses and not cosigned:
        report.uncosigned += 1
        report.uncosigned_sizes = [*report.uncosigned_sizes[1 - SHOWN :], size]


def _problem(report: TreeReport, line: str) -> None:
    if len(report.problems) < SHOWN:
        report.problems.append(line)


def _check_witnessed(report: TreeReport, conn: psycopg.Connection[Any], text: str, witnesses: list[WitnessKey]) -> None:
    """The log against a checkpoint a witness cosigned (its state's `<id>.checkpoint`)."""
    try:
        note = parse(text)
        head = TreeHead.parse(note.text)
    except NoteError as exc:
        report.problems.append(f"the witness checkpoint is not a signed checkpoint ({exc})")
        return
    found = [(w.name, at) for w in witnesses if (at := cosigned_at(note, w.name, w.key)) is not None]
    if not found:
        report.problems.append("the witness checkpoint carries no cosignature of a configured witness")
        return
    witness, at = found[0]
    with closing(_stream(conn, "witnessed_leaves", FIRST_LEAVES, (head.size,))) as rows:
        tree = CompactRange(0).extend(bytes.fromhex(row[0]) for row in rows)
    when = datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    said = f"witness {witness} cosigned size {head.size} at {when}"
    if tree.size < head.size:
        report.rewritten = True
        report.witnessed.append(f"{said}; the log holds {tree.size} rows: its tail was cut")
    elif tree.root() != head.root:
        report.rewritten = True
        report.witnessed.append(f"{said}; the log's first {head.size} rows no longer hash to that root: rewritten")
    else:
        report.witnessed.append(f"{said}; the log's first {head.size} rows hash to that root")


def describe_tree(report: TreeReport) -> list[str]:
    out = [
        f"audit tree: {report.heads} signed tree head(s)"
        + (f", {report.cosigned} cosigned by a witness" if report.cosigned else "")
    ]
    out += report.problems + list(report.refused.values()) + report.witnessed
    if report.refusals_since_cosigned:
        out.append(f"{report.refusals_since_cosigned} refusal(s) by a witness that later cosigned a head as large")
    if report.uncosigned:
        sizes = ", ".join(str(s) for s in report.uncosigned_sizes)
        out.append(f"{report.uncosigned} tree head(s) no witness cosigned (the newest: sizes {sizes})")
    return out
