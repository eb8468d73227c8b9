"""`decisions.rederived`: the call's recorded decisions made again, offline, by the stages' pure
decisions on their recorded inputs, as `toolgate whatif` replays them (ops/whatif.py).

    recorded decision        made again with                          by
    policy (allow, refuse)   the StageRecord policy read (`record`:   `whatif.replay_one`: validation's gates
                             the call as validated, validation's      on the call's arguments, then the round's
                             pass), the facts and usage it saw        decision (`decide_round`)
    validation refusal       the proposal as signed (the document     validation's `decide`
                             and the argument text as it travelled)

Only with the contracts and policy set that decided: each decision names their digests, and one
made by others than those given (the shipped ones, or `--contracts`/`--policy`) is not made
again: the check says which digest it wanted. A policy record must be of this bundle's call (its
id, payload hash and arguments), or the decision made again proves nothing about it. A validation
refusal that `decide` passes was made by what it does not see (semantic rules' facts, admission,
the repair budget): not re-derived, and said so, never failed.
"""

from __future__ import annotations

import base64
import datetime as dt
from dataclasses import dataclass
from typing import Any

from toolgate.contracts.policy_set import PolicySet
from toolgate.contracts.registry import Registry
from toolgate.ops import whatif
from toolgate.ops.evidence_checks.proposal import signed_document
from toolgate.ops.evidence_checks.trust import json_of
from toolgate.ops.evidence_checks.verdict import Check, failed, ok, skipped
from toolgate.schemas.codec import codec
from toolgate.schemas.models import Principal, StageRecord, ToolProposal
from toolgate.schemas.wire import canonical_json
from toolgate.store.rows import Decided
from toolgate.workers.policy.witness import validation_row
from toolgate.workers.validation import decision as validation

NAME = "decisions.rederived"


@dataclass(frozen=True)
class Made:
    """One recorded decision made again: the same (None), or what differs; `unmade`: why not made."""

    differs: str | None = None
    unmade: str | None = None
    again: str = ""  # what it was made again, the same as recorded


def rederived(bundle: Any, contracts: Registry | None, policy: PolicySet | None) -> Check:
    rows = bundle.get("decisions") or []
    if not rows:
        return skipped(NAME, "the bundle holds no recorded decisions")
    if contracts is None or policy is None:
        return skipped(NAME, "no contracts and policy set to decide with (give --contracts and --policy)")
    made = [_made(bundle, row, contracts, policy) for row in rows]
    differs = [m.differs for m in made if m.differs is not None]
    unmade = [m.unmade for m in made if m.unmade is not None]
    if differs:
        return failed(NAME, differs[0])
    if len(unmade) == len(made):
        return skipped(NAME, unmade[0])
    alike = "; ".join(m.again for m in made if m.unmade is None)
    return ok(NAME, f"made again as recorded: {alike}" + (f"; not made again: {unmade[0]}" if unmade else ""))


def _made(bundle: Any, row: dict[str, Any], contracts: Registry, policy: PolicySet) -> Made:
    stage, outcome = row.get("stage"), row.get("outcome")
    if row.get("contracts_digest") != contracts.digest:
        said = f"the {stage} decision was made by contracts {row.get('contracts_digest')}, not {contracts.digest}"
        return Made(unmade=said + " (give --contracts with the deployment's own)")
    if stage == "validation" and outcome == "refuse":
        return _validation(bundle, row, contracts)
    if stage != "policy":
        return Made(unmade=f"a {stage} {outcome} decision is not one the pure decisions make again")
    if row.get("policy_digest") != policy.digest:
        said = f"the policy decision was made by set {row.get('policy_digest')}, not {policy.digest}"
        return Made(unmade=said + " (give --policy with the set of that digest)")
    if row.get("record") is None:
        return Made(unmade="the policy decision carries no record of the call it judged")
    record = codec().decode(base64.b64decode(row["record"], validate=True), StageRecord)
    wrong = _not_this_call(bundle, record, contracts)
    if wrong is not None:
        return Made(differs=wrong)
    decided = _decided(bundle, row, record)
    report = whatif.report_for(policy, True)
    again = whatif.replay_one(decided, contracts, policy, True, report)
    if again is None:
        return Made(unmade=f"the policy decision was not replayed ({', '.join(report.assumed)})")
    before = whatif.recorded(decided)
    if whatif.change_of(before, again) is not None:
        return Made(differs=f"the policy decision recorded {before.text()}; made again, {again.text()}")
    return Made(again=f"policy {again.text()}")


def _not_this_call(bundle: Any, record: StageRecord, contracts: Registry) -> str | None:
    """Why the policy record is not of the bundle's call (None: it is)."""
    call, shown = record.call, bundle.get("call") or {}
    if call.call_id != bundle.get("call_id") or call.tenant_id != bundle.get("tenant_id"):
        return "the policy record judged another call than the bundle's"
    if call.payload_hash != shown.get("payload_hash"):
        return "the policy record judged another payload hash than call.payload_hash"
    if canonical_json(call.arguments) != canonical_json(shown.get("arguments")):
        return "the policy record judged other arguments than call.arguments"
    passed = validation_row(record)
    if passed is not None and passed.contracts_digest != contracts.digest:
        return f"validation passed the call by contracts {passed.contracts_digest}, not the policy row's"
    return None


def _decided(bundle: Any, row: dict[str, Any], record: StageRecord) -> Decided:
    """The bundle's policy row as whatif replays a stored one (its record opened into the call)."""
    return Decided(
        str(bundle.get("tenant_id")),
        str(bundle.get("call_id")),
        "policy",
        int(row["decided_at_ms"]),
        str(row["tool_name"]),
        str(row["tool_version"]),
        row.get("contracts_digest"),
        row.get("policy_digest"),
        str(row["outcome"]),
        row.get("taxonomy_class"),
        row.get("code"),
        row.get("rule"),
        row.get("approvals"),
        list(row.get("approver_groups") or []),
        call=record.call.model_dump(mode="json"),
        facts=row.get("facts"),
        usage=row.get("usage"),
    )


def _validation(bundle: Any, row: dict[str, Any], contracts: Registry) -> Made:
    """Validation's refusal made again on the proposal as the agent signed it."""
    raw, text = signed_document(bundle), (bundle.get("proposal") or {}).get("arguments")
    if raw is None or text is None:
        return Made(unmade="the validation refusal's proposal is not in the bundle (document and argument text)")
    document = json_of(raw, "proposal.document")
    fields = {k: document[k] for k in ToolProposal.model_fields if k in document and k != "principal"}
    proposal = ToolProposal(**fields, principal=Principal(**document["principal"]), arguments=text)
    today = dt.datetime.fromtimestamp(int(row["decided_at_ms"]) / 1000, dt.UTC).date()
    again = validation.decide(proposal, contracts, today)
    recorded = whatif.Outcome(False, row.get("taxonomy_class"), row.get("code"))
    if not isinstance(again, validation.Reject):
        return Made(unmade=f"validation refused the call ({row.get('code')}) by facts its pure gates do not see")
    made = whatif.decided(again)
    if (made.taxonomy_class, made.code) != (recorded.taxonomy_class, recorded.code):
        return Made(differs=f"validation recorded {recorded.text()}; made again, {made.text()}")
    return Made(again=f"validation {made.text()}")
