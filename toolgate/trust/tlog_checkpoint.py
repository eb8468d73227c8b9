"""A log's checkpoint (c2sp.org/tlog-checkpoint) and the body of a witness's add-checkpoint
request (c2sp.org/tlog-witness): the text that is signed, and the text that is sent.

    checkpoint       <origin>\\n<tree size>\\n<base64 root hash>\\n[extension lines]
    add-checkpoint   old <size>\\n[<base64 proof hash>\\n ...]\\n<signed checkpoint note>

Sizes are ASCII decimals without leading zeroes; base64 is the standard alphabet with padding.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass

from toolgate.trust.log_tree import HASH, MAX_PROOF
from toolgate.trust.signed_note import NoteError

DECIMAL = re.compile(r"0|[1-9][0-9]{0,19}")


def decimal(text: str) -> int:
    if not DECIMAL.fullmatch(text):
        raise NoteError(f"not a decimal without leading zeroes: {text[:24]!r}")
    return int(text)


def hash_of(text: str) -> bytes:
    try:
        raw = base64.b64decode(text, validate=True)
    except binascii.Error as exc:
        raise NoteError("a hash is base64") from exc
    if len(raw) != HASH:
        raise NoteError("a hash is 32 bytes")
    return raw


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


@dataclass(frozen=True)
class TreeHead:
    origin: str
    size: int
    root: bytes

    def text(self) -> str:
        return f"{self.origin}\n{self.size}\n{b64(self.root)}\n"

    @classmethod
    def parse(cls, text: str) -> TreeHead:
        """The first three lines of a checkpoint's text (extension lines are left to the caller)."""
        lines = text.split("\n")
        if len(lines) < 4 or lines[-1] != "" or not lines[0]:
            raise NoteError("a checkpoint is an origin, a size and a root hash, each on a line")
        return cls(lines[0], decimal(lines[1]), hash_of(lines[2]))


@dataclass(frozen=True)
class AddCheckpoint:
    old_size: int
    proof: tuple[bytes, ...]
    note: str

    def body(self) -> str:
        return f"old {self.old_size}\n" + "".join(b64(h) + "\n" for h in self.proof) + "\n" + self.note

    @classmethod
    def parse(cls, body: str) -> AddCheckpoint:
        head, blank, note = body.partition("\n\n")
        lines = head.split("\n")
        if not blank or not lines[0].startswith("old "):
            raise NoteError("an add-checkpoint body is an old size line, proof lines, a blank line, a checkpoint")
        if len(lines) - 1 > MAX_PROOF:
            raise NoteError(f"a consistency proof has at most {MAX_PROOF} lines")
        return cls(decimal(lines[0][4:]), tuple(hash_of(line) for line in lines[1:]), note)
