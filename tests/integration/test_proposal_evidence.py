"""Validation keeps what proved each call (issue 53, migration 0036): toolgate.calls holds the
signing document its signature check verified, the signature, the Merkle path when the agent signed
a batch at once, and the argument text as it travelled. Read back from Postgres, the row proves the
call with the agent's public key alone. Runs the real validation handler against a database of its
own on the session's Postgres."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
import uuid
from typing import Any

from toolgate.contracts.registry import load_registry
from toolgate.schemas.codec import codec
from toolgate.schemas.models import PayloadKind, Principal, ToolProposal
from toolgate.trust.agent_keys import AgentKeyring, AgentSigner
from toolgate.trust.ed25519 import PublicKey
from toolgate.trust.merkle import leaf_hash, root_of, signed_root
from toolgate.trust.proposal_signing import ROOT_PURPOSE, sign_all, signed_bytes
from toolgate.workers.runtime.emit import Emit, Origin
from toolgate.workers.runtime.handler import Inbound
from toolgate.workers.validation.handler import ValidationHandler

from .conftest import Database

TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
STORED = (
    "SELECT c.signed_document, c.signature, c.signature_proof, c.arguments, k.public_key "
    "FROM toolgate.calls c JOIN toolgate.agent_keys k ON k.agent_id = c.agent_id AND k.key_id = %s "
    "WHERE c.tenant_id = 'acme' AND c.call_id = %s"
)


def _proposal(arguments: str) -> ToolProposal:
    run_id = f"run_{uuid.uuid4().hex[:10]}"
    return ToolProposal(
        call_id=f"call_{uuid.uuid4().hex}",
        tenant_id="acme",
        principal=Principal(user_id="u", agent_id="cli", scopes=["invoices:read"]),
        workflow_id=run_id,
        run_id=run_id,
        logical_operation_id="op",
        tool_name="invoice.fetch",
        arguments=arguments,
        created_at_ms=int(time.time() * 1000),
    )


def _raw(proposal: ToolProposal) -> bytes:
    """The record's bytes (only their size counts here); a proposal whose text is not UTF-8 is
    the lenient decoder's reading of its record (codec.decode_lenient), which cannot be encoded
    again: its size, as bytes of the same length."""
    try:
        return codec().encode(proposal)
    except UnicodeEncodeError:
        return bytes(len(codec().encode(proposal.model_copy(update={"arguments": ""}))) + len(proposal.arguments))


def _validate(database: Database, proposals: list[ToolProposal]) -> Emit:
    calls = [
        Inbound(p, _raw(p), Origin("proposals", 0, i, None, [], PayloadKind.RECORD), traceparent=TRACE)
        for i, p in enumerate(proposals)
    ]

    async def run() -> Emit:
        handler = ValidationHandler(load_registry(), database.settings)
        await handler.start()
        try:
            out = Emit("validation")
            await handler.handle(calls, out)
            return out
        finally:
            await handler.pool.close()

    return asyncio.run(run())


def _proves(row: tuple[Any, ...], proposal: ToolProposal) -> dict[str, Any]:
    """The stored row proves the call under the agent's stored key; its document, parsed."""
    document, signature, proof, arguments, public_key = (bytes(v) if isinstance(v, memoryview) else v for v in row)
    key = PublicKey(bytes(public_key))
    if proof is None:
        assert key.ok(signature, document)
    else:
        root = root_of(leaf_hash(document), proof)
        assert root is not None and key.ok(signature, signed_root(ROOT_PURPOSE, root))
    parsed: dict[str, Any] = json.loads(document)
    assert (parsed["tenant_id"], parsed["call_id"], parsed["key_id"]) == ("acme", proposal.call_id, proposal.key_id)
    assert parsed["principal"]["agent_id"] == "cli"
    assert document == signed_bytes(proposal)  # the exact bytes the agent signed
    if arguments is not None:
        assert hashlib.sha256(arguments.encode()).hexdigest() == parsed["arguments_sha256"]
    return parsed


def test_a_registered_call_keeps_the_document_its_signature_proves(database: Database) -> None:
    signer = AgentKeyring(database.home / "agents").signer("cli")
    alone = signer.sign(_proposal('{"invoice_id": "inv_acme0001"}'))
    out = _validate(database, [alone])
    assert out.dead_letters == []
    [row] = database.sql(STORED, (alone.key_id, alone.call_id))
    assert row[2] is None  # signed alone: no path
    assert row[3] == alone.arguments  # the text as it travelled, not as parsed
    _proves(row, alone)


def test_calls_signed_together_keep_their_path_to_the_signed_root(database: Database) -> None:
    signer: AgentSigner = AgentKeyring(database.home / "agents").signer("cli")
    texts = ['{"invoice_id": "inv_acme0001"}', '{ "invoice_id" : "inv_acme0002" }', '{"invoice_id": "inv_acme0003"}']
    together = [p for p, _ in sign_all([_proposal(t) for t in texts], signer.key_id, signer.key)]
    out = _validate(database, together)
    assert out.dead_letters == []
    for proposal in together:
        [row] = database.sql(STORED, (proposal.key_id, proposal.call_id))
        assert bytes(row[2]) == proposal.signature_proof
        assert row[3] == proposal.arguments
        _proves(row, proposal)


def test_argument_text_postgres_cannot_hold_leaves_the_document_and_the_round_intact(database: Database) -> None:
    """A NUL, or bytes that are not UTF-8 (carried as lone surrogates), cannot be text: the call
    is still registered and answered (refused as unparseable), its document and signature kept;
    the proposals of the same round are registered with their text."""
    signer = AgentKeyring(database.home / "agents").signer("cli")
    nul = signer.sign(_proposal('{"invoice_id": "inv_acme0001"}\x00'))
    not_utf8 = signer.sign(_proposal('{"invoice_id": "inv_\udcff"}'))
    fine = signer.sign(_proposal('{"invoice_id": "inv_acme0001"}'))
    out = _validate(database, [nul, not_utf8, fine])
    assert out.dead_letters == []
    for proposal in (nul, not_utf8):
        [row] = database.sql(STORED, (proposal.key_id, proposal.call_id))
        assert row[3] is None
        _proves(row, proposal)
        assert str(out.outcomes[proposal.call_id]) == "SYNTACTIC_PARSE_FAIL"
    [row] = database.sql(STORED, (fine.key_id, fine.call_id))
    assert row[3] == fine.arguments
