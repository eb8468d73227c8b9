"""toolgate_evidence: a second, independent verifier of toolgate evidence bundles.

    python verifier/toolgate_evidence bundle.json [--json] [--deployment-key B64]... [--witness-vkey VKEY]...

A bundle (`toolgate evidence CALL_ID > bundle.json`, format `toolgate.evidence/v1`, documented in
toolgate's docs/evidence.md) is one call's story with what proves it. This package checks it from
that document alone: it imports nothing of toolgate, only the standard library and `cryptography`
(for Ed25519), and implements itself what it checks with: RFC 8785 canonical JSON, toolgate's
Merkle paths, RFC 9162 inclusion proofs, C2SP signed notes and cosignature/v1, the audit log's
chain hash and the deployment's edge-signed bytes. `toolgate evidence verify` is the first opinion;
on the same bundle both name the same checks with the same statuses.

What it checks, one line each (ok / FAILED: what does not hold / skipped: why):

    proposal.signature       the agent's Ed25519 over the signing document (or a batch root)
    proposal.document        the document names this tenant, call, agent and agent key id
    proposal.arguments       the argument text is the one the agent signed (its SHA-256)
    call.payload_hash        the payload hash is the validated arguments', which hold the proposed ones
                             (an edited call: and its editor signed the edited ticket's over it)
    call.digest              the call's proposal digest is the signed document's
    approval.signatures      each decision signed by its approver for this ticket, tool and payload
    approval.state_version   each decision signs the ticket's target state version
    approval.quorum          enough distinct, active approvers of the right class and groups, in time
    execution.once           the idempotency key COMPLETED, one audit row records the execution
    observation.signature    each observation sealed by the deployment for this call and digest
    audit.rows               each audit row's hash is the chain hash of its fields
    audit.inclusion          each audit row is a leaf of the checkpoint's tree (RFC 9162)
    checkpoint.signature     the checkpoint note is signed by the deployment key it names
    checkpoint.cosignatures  each witness's cosignature verifies (a missing one is reported)
    decisions.rederived      skipped here: re-running toolgate's decisions needs toolgate

What it trusts: SHA-256, Ed25519 (as OpenSSL checks it, through `cryptography`) and the public
keys. The keys come from the bundle itself unless the auditor pins them (`--deployment-key`, the
deployment's Ed25519 public key in base64, repeatable; `--witness-vkey`, a witness's C2SP verifier
key, repeatable, whose cosignature is then required). A bundle's own keys prove only that the
bundle is consistent: compare them with the keys the deployment publishes, or pin them. Unsigned
rows are the deployment's word: the ticket (required approvals, risk class, groups, window,
status), the approvers' and agent's key rows (groups, classes, registration and revocation
times), the execution row; a check that counts on them says so by its name. `decoded` and
`made_at` are trusted by nothing. No clock and no network are consulted. toolgate checks
Ed25519 by ZIP 215 and OpenSSL checks it strictly: a signature only ZIP 215 admits (one only the
key's holder can craft) fails here.

Exit status: 0 when no check failed, 1 when one did, 2 when the bundle could not be read.

The package, a module an idea, each an hour's read at most: `canonical` (RFC 8785), `hashes`
(Merkle paths, RFC 9162 inclusion), `notes` (Ed25519, signed notes, cosignatures), `bundle` (the
bundle as read, the keys it is checked with), the checks by what they check (`calls`,
`approvals`, `published`), and `cli` (the verdict and the command line). Run the folder itself:
`__main__.py` needs no install.
"""

from __future__ import annotations

from .base import FORMAT, Failed, Skipped
from .canonical import canonical, es_number, utf16_order
from .cli import CHECKS, main, verify
from .hashes import inclusion_root, leaf_hash, path_root
from .notes import cosigned, note_signed, parse_note, parse_vkey

__all__ = [
    "CHECKS",
    "FORMAT",
    "Failed",
    "Skipped",
    "canonical",
    "cosigned",
    "es_number",
    "inclusion_root",
    "leaf_hash",
    "main",
    "note_signed",
    "parse_note",
    "parse_vkey",
    "path_root",
    "utf16_order",
    "verify",
]
