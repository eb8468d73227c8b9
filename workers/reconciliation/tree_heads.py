"""The audit log's tree heads, and their witnesses: every `audit_tree_seconds` the reconciliation
worker extends the last tree head over the rows appended since (its compact range and those rows,
never the rows before: toolgate/trust/log_tree.py), signs the new head as a C2SP checkpoint with
the deployment's key that seals now, under the origin TOOLGATE_AUDIT_ORIGIN, and stores it
(migration 0035). Then it sends the newest head to each witness (TOOLGATE_AUDIT_WITNESSES) with
the consistency proof from the head that witness last cosigned, and stores what it answered: a
cosignature (checked with the witness's key first), or a refusal, audited once per run of
refusals. A witness that answers 409 with a size it holds that this log has a head of is asked
again from that size (a cosignature it gave whose answer was lost). An unreachable witness is
only logged: the next round asks again, and `audit verify` reports the heads nobody cosigned.

The audit writers never wait on any of it: the head takes a lock of its own, and the remote calls
are made with no transaction open.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

import aiohttp
from psycopg import AsyncConnection

from toolgate.settings import Settings
from toolgate.store import audit
from toolgate.store import audit_tree as store
from toolgate.store.audit_tree import Head
from toolgate.store.db import make_pool
from toolgate.trust.checkpoint_keys import signer
from toolgate.trust.log_tree import CompactRange, Known
from toolgate.trust.signed_note import Note, NoteError, cosigned_at, parse, sign
from toolgate.trust.tlog_checkpoint import AddCheckpoint, TreeHead
from toolgate.trust.witness_keys import WitnessKey, witnesses_of
from toolgate.workers.reconciliation.decision import STAGE

log = logging.getLogger("toolgate.audit")
SIZE_TYPE = "text/x.tlog.size"
WITNESS_TIMEOUT_S = 10.0


class TreeHeads:
    def __init__(self, settings: Settings) -> None:
        self.origin = settings.audit_origin
        self.witnesses = witnesses_of(settings.audit_witnesses)
        self.pool = make_pool(settings.database_url, f"{STAGE}-tree", max_size=1)
        self._opened = False
        self.http: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self.http is not None:
            await self.http.close()
        await self.pool.close()

    async def run_once(self) -> Head | None:
        """Take a head over the rows since the last, and send the newest to every witness."""
        if not self._opened:
            await self.pool.open()
            self._opened = True
        head = await self.take()
        if head is not None:
            for witness in self.witnesses:
                await self.submit(witness, head)
        return head

    async def take(self) -> Head | None:
        """The newest head, a new one if rows came since the last (None: no head and no key)."""
        signing = signer()
        async with self.pool.connection() as conn, conn.transaction():
            await store.lock(conn)
            last = await store.last_head(conn)
            rows = await store.leaves(conn, last.last_row_id if last else 0)
            if not rows or signing is None:
                return last
            old = CompactRange.of_bytes(last.tree_size, last.compact_range) if last else CompactRange(0)
            grown = old.extend(digest for _, digest in rows)
            key_id, key = signing
            note = sign(TreeHead(self.origin, grown.size, grown.root()).text(), self.origin, key)
            head = Head(0, grown.size, grown.root(), rows[-1][0], grown.to_bytes(), str(note), key_id)
            return replace(head, id=await store.insert_head(conn, head))

    async def submit(self, witness: WitnessKey, head: Head) -> None:
        async with self.pool.connection() as conn:
            since = await store.last_cosigned(conn, witness.name)
            if since is not None and since.tree_size >= head.tree_size:
                return
            body = await request_body(conn, since, head)
        status, answer, kind = await self.post(witness, body)
        if status == 409 and kind == SIZE_TYPE and answer.strip().isdigit():
            again = await self.again(int(answer.strip()), since, head)
            if again is not None:
                status, answer, kind = await self.post(witness, again)
        if status:
            await self.keep(witness, head, status, answer)

    async def again(self, theirs: int, since: Head | None, head: Head) -> str | None:
        """The request to send again to a witness that holds size `theirs`, not the one this log
        last knew it to: from the head of that size if there is one (None: there is none). Of
        `head`'s own size (another reconciliation worker had it cosigned), the witness cosigns it
        again if its root is the one it holds, and says it is a fork if not."""
        if theirs == head.tree_size:
            return AddCheckpoint(theirs, (), head.note).body()
        async with self.pool.connection() as conn:
            held = await store.head_of_size(conn, theirs)
            if held is None or held.tree_size > head.tree_size or held == since:
                return None
            return await request_body(conn, held, head)

    async def post(self, witness: WitnessKey, body: str) -> tuple[int, str, str]:
        """The witness's status, answer and its content type; status 0: it was not reached."""
        if self.http is None:
            self.http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=WITNESS_TIMEOUT_S))
        try:
            async with self.http.post(f"{witness.url}/add-checkpoint", data=body.encode()) as answer:
                return answer.status, (await answer.text())[:2000], answer.content_type
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.warning(
                "witness %s not reached: %s",
                witness.name,
                type(exc).__name__,
                extra={"stage": STAGE, "action": "witness_unreachable"},
            )
            return 0, "", ""

    async def keep(self, witness: WitnessKey, head: Head, status: int, answer: str) -> None:
        """Store the witness's answer: its cosignature if it holds, else a refusal, audited when
        it is the first of a run."""
        cosignature = cosignature_of(witness, head, answer) if status == 200 else None
        if status == 200 and cosignature is None:
            answer = f"no cosignature that verifies with its key: {answer}"
        async with self.pool.connection() as conn, conn.transaction():
            before = await store.last_answer(conn, witness.name)
            await store.record_answer(conn, head.id, witness.name, cosignature, status, answer)
            if cosignature is not None:
                return
            log.warning(
                "witness %s refused tree head %d: %d",
                witness.name,
                head.tree_size,
                status,
                extra={"stage": STAGE, "action": "witness_refused"},
            )
            if before is None or before != ("refused", status):
                detail = {
                    "witness": witness.name,
                    "tree_size": head.tree_size,
                    "status": status,
                    "answer": answer[:200],
                }
                await audit.append(conn, [audit.Entry(STAGE, "witness_refused", "toolgate", detail=detail)])


async def request_body(conn: AsyncConnection[Any], since: Head | None, head: Head) -> str:
    """An add-checkpoint body for `head`, with the consistency proof from `since` (None: size 0)."""
    if since is None:
        return AddCheckpoint(0, (), head.note).body()  # from size 0 the proof is empty
    old = CompactRange.of_bytes(since.tree_size, since.compact_range)
    rows = await store.leaves(conn, since.last_row_id, head.last_row_id)
    proof = Known(old, [digest for _, digest in rows]).consistency()
    return AddCheckpoint(old.size, tuple(proof), head.note).body()


def cosignature_of(witness: WitnessKey, head: Head, answer: str) -> str | None:
    """The witness's signature line in `answer` if it is a valid cosignature of `head`."""
    try:
        note = parse(head.note).with_lines(answer)
    except NoteError:
        return None
    for line in note.signatures:
        if line.name == witness.name and cosigned_at(Note(note.text, (line,)), witness.name, witness.key) is not None:
            return line.line()
    return None
