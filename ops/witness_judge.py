"""What a witness answers an add-checkpoint request (c2sp.org/tlog-witness): a pure decision of
the request's body, the checkpoint it last cosigned for the origin, and the log keys it trusts.

    answer                   when
    400 Bad Request          the body is not a request, its old size is above the checkpoint's, or
                             a tree of size 0 has another root than the empty one
    404 Not Found            the checkpoint's origin is not a log this witness serves
    403 Forbidden            no signature on it verifies with a key trusted for that origin
    409 Conflict (+ size)    its old size is not the size this witness last cosigned (0: never)
    409 Conflict             same size as the one cosigned, another root hash: a fork
    422 Unprocessable        the consistency proof from the cosigned tree does not verify
    Cosign                   otherwise: the witness keeps the new size and root, then cosigns

A witness that cosigned a tree never cosigns one that does not extend it: each answer but Cosign
leaves what it holds as it was.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from toolgate.trust.ed25519 import PublicKey
from toolgate.trust.log_tree import EMPTY_ROOT, consistency_ok
from toolgate.trust.signed_note import Note, NoteError, parse, signed_by
from toolgate.trust.tlog_checkpoint import AddCheckpoint, TreeHead


@dataclass(frozen=True)
class Refuse:
    status: int
    reason: str
    size: int | None = None  # with a 409 for an old size that is not the witness's: its size
    logged: bool = False  # the request was signed by the log: evidence worth keeping


@dataclass(frozen=True)
class Cosign:
    head: TreeHead
    note: Note


@dataclass(frozen=True)
class Request:
    add: AddCheckpoint
    head: TreeHead
    note: Note


def read(body: str) -> Request | Refuse:
    try:
        add = AddCheckpoint.parse(body)
        note = parse(add.note)
        head = TreeHead.parse(note.text)
    except NoteError as exc:
        return Refuse(400, str(exc))
    return Request(add, head, note)


def judge(
    request: Request, held_of: Callable[[str], TreeHead | None], logs: Mapping[str, Sequence[PublicKey]]
) -> Cosign | Refuse:
    """The answer to a request read by `read`; `held_of` gives the tree head the witness last
    cosigned for an origin (None: it never cosigned one)."""
    head, add = request.head, request.add
    keys = logs.get(head.origin)
    if keys is None:
        return Refuse(404, f"unknown log {head.origin!r}")
    if not any(signed_by(request.note, head.origin, key) for key in keys):
        return Refuse(403, "no signature by a key of this log")
    if add.old_size > head.size:
        return Refuse(400, "the old size is above the checkpoint's size")
    if head.size == 0 and head.root != EMPTY_ROOT:
        return Refuse(400, "the tree of size 0 has the empty root")
    held = held_of(head.origin) or TreeHead(head.origin, 0, b"")
    if add.old_size != held.size:
        return Refuse(409, f"this witness last cosigned size {held.size}", size=held.size)
    if head.size == held.size and head.size and head.root != held.root:
        return Refuse(409, f"another root hash for size {held.size}", logged=True)
    if held.size and not consistency_ok(held.size, head.size, held.root, head.root, add.proof):
        return Refuse(422, f"not consistent with the tree of size {held.size} this witness cosigned", logged=True)
    if not held.size and add.proof:
        return Refuse(422, "a proof from size 0 is empty", logged=True)
    return Cosign(head, request.note)
