"""Signed notes, checkpoints and cosignatures as C2SP writes them (toolgate/trust/signed_note.py,
toolgate/trust/tlog_checkpoint.py): the bytes each signature covers, the key ids, and that a note
or cosignature changed anywhere no longer verifies."""

from __future__ import annotations

import base64
import hashlib

import pytest

from toolgate.trust.ed25519 import PrivateKey
from toolgate.trust.signed_note import (
    COSIGNATURE_V1,
    ED25519,
    NoteError,
    cosign,
    cosigned_at,
    key_id,
    parse,
    parse_vkey,
    sign,
    signed_by,
    vkey,
)
from toolgate.trust.tlog_checkpoint import AddCheckpoint, TreeHead

LOG = PrivateKey(b"\x01" * 32)
WITNESS = PrivateKey(b"\x02" * 32)
HEAD = TreeHead("example.com/log", 20852163, base64.b64decode("CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I="))


def test_a_checkpoint_is_three_lines() -> None:
    text = "example.com/log\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
    assert HEAD.text() == text
    assert TreeHead.parse(text) == HEAD
    for bad in ("example.com/log\n020852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n", "a\n1\n", "a\n1\nAAAA\n"):
        with pytest.raises(NoteError):
            TreeHead.parse(bad)


def test_a_signed_note_is_its_text_a_blank_line_and_an_em_dash_line() -> None:
    note = sign(HEAD.text(), HEAD.origin, LOG)
    written = str(note)
    assert written.startswith(HEAD.text() + "\n\u2014 example.com/log ")
    raw = base64.b64decode(written.rsplit(" ", 1)[1])
    wanted = hashlib.sha256(b"example.com/log\n\x01" + LOG.public.raw).digest()[:4]
    assert raw[:4] == wanted == key_id(HEAD.origin, ED25519, LOG.public.raw)
    assert LOG.public.ok(raw[4:], HEAD.text().encode())
    assert parse(written) == note
    assert signed_by(parse(written), HEAD.origin, LOG.public)
    assert not signed_by(parse(written), HEAD.origin, WITNESS.public)
    assert not signed_by(parse(written), "other.example/log", LOG.public)
    assert not signed_by(parse(written.replace("20852163", "20852164")), HEAD.origin, LOG.public)


@pytest.mark.parametrize("bad", ["no blank line\n", "text\n\n", "text\n\nsig line\n", "text\n\n\u2014 name !!!\n"])
def test_what_is_not_a_note_is_refused(bad: str) -> None:
    with pytest.raises(NoteError):
        parse(bad)


def test_a_cosignature_is_timestamped_and_covers_the_checkpoint_after_two_lines() -> None:
    note = sign(HEAD.text(), HEAD.origin, LOG)
    line = cosign(note.text, "witness.example/w1", WITNESS, 1679315147)
    raw = line.signature
    assert line.key_id == hashlib.sha256(b"witness.example/w1\n\x04" + WITNESS.public.raw).digest()[:4]
    assert int.from_bytes(raw[:8], "big") == 1679315147
    message = b"cosignature/v1\ntime 1679315147\n" + HEAD.text().encode()
    assert WITNESS.public.ok(raw[8:], message)
    cosigned = note.with_lines(line.line())
    assert cosigned_at(parse(str(cosigned)), "witness.example/w1", WITNESS.public) == 1679315147
    assert cosigned_at(cosigned, "witness.example/w2", WITNESS.public) is None
    assert cosigned_at(cosigned, "witness.example/w1", LOG.public) is None
    other = sign(TreeHead(HEAD.origin, HEAD.size + 1, HEAD.root).text(), HEAD.origin, LOG)
    assert cosigned_at(other.with_lines(line.line()), "witness.example/w1", WITNESS.public) is None
    # A log's own signature is not a cosignature, nor the other way round.
    assert not signed_by(cosigned, "witness.example/w1", WITNESS.public)


def test_a_verifier_key_names_its_key() -> None:
    written = vkey("witness.example/w1", COSIGNATURE_V1, WITNESS.public.raw)
    assert parse_vkey(written) == ("witness.example/w1", COSIGNATURE_V1, WITNESS.public.raw)
    _, hex_id, key = written.split("+", 2)
    with pytest.raises(NoteError):
        parse_vkey(f"witness.example/w2+{hex_id}+{key}")
    with pytest.raises(NoteError):
        vkey("has space", COSIGNATURE_V1, WITNESS.public.raw)


def test_a_verifier_key_whose_base64_holds_a_plus_reads_back() -> None:
    keys = [PrivateKey(bytes([seed]) * 32).public.raw for seed in range(40)]
    written = [vkey("w", COSIGNATURE_V1, raw) for raw in keys]
    assert any(text.count("+") > 2 for text in written)
    assert [parse_vkey(text)[2] for text in written] == keys


def test_an_add_checkpoint_body_round_trips() -> None:
    note = str(sign(HEAD.text(), HEAD.origin, LOG))
    request = AddCheckpoint(20852014, (b"\x01" * 32, b"\x02" * 32), note)
    body = request.body()
    assert body.startswith("old 20852014\n" + base64.b64encode(b"\x01" * 32).decode() + "\n")
    assert AddCheckpoint.parse(body) == request
    assert AddCheckpoint.parse(AddCheckpoint(0, (), note).body()) == AddCheckpoint(0, (), note)
    for bad in ("old 01\n\n" + note, "new 1\n\n" + note, "old 1\nAAAA\n\n" + note, "old 1\n" + note):
        with pytest.raises(NoteError):
            AddCheckpoint.parse(bad)
