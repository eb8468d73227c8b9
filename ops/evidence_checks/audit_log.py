"""The call's audit rows in the witnessed log: `audit.rows` (each row's chain hash, store/
audit_entry.py `chain_hash`), `audit.inclusion` (each row a leaf of the checkpoint's tree,
toolgate/trust/log_tree.py `inclusion_ok`), `checkpoint.signature` (the C2SP checkpoint signed by
the deployment key it names, toolgate/trust/signed_note.py) and `checkpoint.cosignatures` (each
witness's cosignature/v1 line). Inclusion is checked against the checkpoint's `tree_size` and
`root_hash`, as docs/evidence.md says; that they are the signed note's is `checkpoint.signature`'s
to check, so a tampered note fails the checkpoint's checks, a tampered root both."""

from __future__ import annotations

from typing import Any

from toolgate.ops.evidence_checks.trust import Malformed, Trust, part
from toolgate.ops.evidence_checks.verdict import Check, failed, first_failure, ok, skipped
from toolgate.store.audit_entry import Entry, chain_hash
from toolgate.trust.log_tree import inclusion_ok
from toolgate.trust.signed_note import COSIGNATURE_V1, Note, NoteError, cosigned_at, key_id, parse, signed_by
from toolgate.trust.tlog_checkpoint import TreeHead

NO_CHECKPOINT = "the bundle holds no checkpoint (no tree head covered the log yet)"


def rows(bundle: Any) -> Check:
    name = "audit.rows"
    found = part(bundle, "audit", "rows")
    if not found:
        return skipped(name, "the bundle holds no audit rows")
    problems = []
    for row in found:
        entry = Entry(row["stage"], row["action"], row["actor"], row["call_id"], row["tenant_id"], row["detail"])
        if chain_hash(str(row["prev_hash"]), str(row["at"]), entry) != row["hash"]:
            problems.append(f"audit row {row.get('id')} ({row['action']}) does not hash to its chain hash")
    return first_failure(name, problems, f"{len(found)} row(s), each hashing to its chain hash")


def note_of(bundle: Any) -> tuple[Note, TreeHead] | None:
    """The checkpoint's signed note and the tree head its text names (None: no checkpoint)."""
    checkpoint = part(bundle, "audit").get("checkpoint")
    if checkpoint is None:
        return None
    try:
        note = parse(str(part(bundle, "audit", "checkpoint", "note")))
        return note, TreeHead.parse(note.text)
    except NoteError as exc:
        raise Malformed(f"the checkpoint is not a signed checkpoint note ({exc})") from exc


def inclusion(bundle: Any) -> Check:
    name = "audit.inclusion"
    found = part(bundle, "audit", "rows")
    if not found:
        return skipped(name, "the bundle holds no audit rows")
    checkpoint = part(bundle, "audit").get("checkpoint")
    if checkpoint is None:
        return failed(name, f"no audit row is in a signed tree: {NO_CHECKPOINT}")
    size, root = int(part(checkpoint, "tree_size")), bytes.fromhex(str(part(checkpoint, "root_hash")))
    problems = []
    for row in found:
        proof = row.get("inclusion")
        if proof is None:
            problems.append(f"audit row {row.get('id')} is newer than the checkpoint (not yet in a signed tree)")
            continue
        leaf, path = bytes.fromhex(row["hash"]), [bytes.fromhex(h) for h in proof]
        if not inclusion_ok(leaf, int(row["leaf_index"]), size, path, root):
            problems.append(f"audit row {row.get('id')} is not leaf {row['leaf_index']} of the checkpoint's tree")
    return first_failure(name, problems, f"{len(found)} row(s) in the tree of {size} leaves")


def signature(bundle: Any, trust: Trust) -> Check:
    name = "checkpoint.signature"
    noted = note_of(bundle)
    if noted is None:
        return skipped(name, NO_CHECKPOINT)
    note, head = noted
    checkpoint = bundle["audit"]["checkpoint"]
    if checkpoint.get("tree_size") != head.size or checkpoint.get("root_hash") != head.root.hex():
        return failed(name, "the checkpoint's tree_size or root_hash is not the signed note's")
    key = trust.deployment.get(str(checkpoint.get("key_id")))
    if key is None:
        return failed(name, f"the checkpoint names deployment key {checkpoint.get('key_id')}, which is not trusted")
    if not signed_by(note, head.origin, key):
        return failed(name, f"the checkpoint note's signature by {head.origin} does not verify")
    return ok(name, f"tree of {head.size} leaves signed by {checkpoint['key_id']}{trust.pinned_note()}")


def cosignatures(bundle: Any, trust: Trust) -> Check:
    name = "checkpoint.cosignatures"
    if trust.unreadable:
        return first_failure(name, list(trust.unreadable))
    noted = note_of(bundle)
    if noted is None:
        return skipped(name, NO_CHECKPOINT)
    if not trust.witnesses:
        return skipped(name, "no witness is configured (keys.witnesses is empty)")
    note = noted[0]
    cosigned, missing, problems = [], [], []
    for witness, key in trust.witnesses:
        wanted = key_id(witness, COSIGNATURE_V1, key.raw)
        lines = [s for s in note.signatures if s.name == witness and s.key_id == wanted]
        if not lines:
            missing.append(witness)
        elif cosigned_at(note, witness, key) is None:
            problems.append(f"witness {witness}'s cosignature of the checkpoint does not verify")
        else:
            cosigned.append(witness)
    if missing and trust.witnesses_pinned:
        problems.append(f"the witness(es) you pinned did not cosign the checkpoint: {', '.join(missing)}")
    said = f"cosigned by {', '.join(cosigned) or 'no witness'}"
    said += f"; no line from {', '.join(missing)}" if missing else ""
    said += "" if trust.witnesses_pinned else " (the bundle's own witness keys, not pinned)"
    return first_failure(name, problems, said)
