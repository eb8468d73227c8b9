"""`toolgate evidence verify`: a call's evidence bundle (docs/evidence.md) checked offline, with
only the public keys it carries or the ones an auditor pins. Pure: the bundle, the keys and the
contracts and policy set come in, a verdict comes out; the command (cli/evidence_verify.py) reads
the files.

    verdict.py      a check's outcome (ok, failed with a sentence, skipped with why) and the verdict
    trust.py        the bundle's parts read, and the keys the checks trust (pinned, or the bundle's)
    proposal.py     the agent's signed proposal and the call it became
    approval.py     the approvers' signed decisions, their state version and quorum
    outcome.py      the execution's single completion and the deployment's signed observation
    audit_log.py    the audit rows, their inclusion in the checkpoint, its signature and cosignatures
    rederive.py     the recorded validation and policy decisions made again (ops/whatif.py's replay)
    run.py          every check, in the documented order
"""
