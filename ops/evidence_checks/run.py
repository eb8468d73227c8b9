"""Every check of a bundle, in the order docs/evidence.md names them, each on its own: a part of
the bundle that is missing or malformed fails the check that reads it, naming the part, and the
other checks go on."""

from __future__ import annotations

import binascii
from collections.abc import Callable
from typing import Any

from toolgate.contracts.policy_set import PolicySet
from toolgate.contracts.registry import Registry
from toolgate.ops.evidence_checks import approval, audit_log, outcome, proposal, rederive
from toolgate.ops.evidence_checks.trust import Trust
from toolgate.ops.evidence_checks.verdict import NAMES, Check, Verdict, failed

FORMAT = "toolgate.evidence/v1"


def verify(bundle: Any, trust: Trust, contracts: Registry | None = None, policy: PolicySet | None = None) -> Verdict:
    """The verdict on `bundle` (parsed JSON) under the keys of `trust`; the decisions made again
    with `contracts` and `policy` when given (decisions.rederived is skipped without them)."""
    if not isinstance(bundle, dict) or bundle.get("format") != FORMAT:
        said = bundle.get("format") if isinstance(bundle, dict) else None
        return Verdict(tuple(failed(name, f"not a {FORMAT} bundle (format {said!r})") for name in NAMES))
    checks: dict[str, Callable[[], Check]] = {
        "proposal.signature": lambda: proposal.signature(bundle),
        "proposal.document": lambda: proposal.document_check(bundle),
        "proposal.arguments": lambda: proposal.arguments(bundle),
        "call.payload_hash": lambda: proposal.payload(bundle),
        "call.digest": lambda: proposal.digest(bundle),
        "approval.signatures": lambda: approval.signatures(bundle),
        "approval.state_version": lambda: approval.state_version(bundle),
        "approval.quorum": lambda: approval.quorum(bundle),
        "execution.once": lambda: outcome.once(bundle),
        "observation.signature": lambda: outcome.signature(bundle, trust),
        "audit.rows": lambda: audit_log.rows(bundle),
        "audit.inclusion": lambda: audit_log.inclusion(bundle),
        "checkpoint.signature": lambda: audit_log.signature(bundle, trust),
        "checkpoint.cosignatures": lambda: audit_log.cosignatures(bundle, trust),
        "decisions.rederived": lambda: rederive.rederived(bundle, contracts, policy),
    }
    assert tuple(checks) == NAMES
    return Verdict(tuple(_guarded(name, check) for name, check in checks.items()))


def _guarded(name: str, check: Callable[[], Check]) -> Check:
    """The check's outcome; a bundle whose parts it cannot read fails it, saying what it could not."""
    try:
        return check()
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        return failed(
            name, f"the bundle's parts this check reads are missing or malformed ({type(exc).__name__}: {exc})"
        )
    except (ValueError, binascii.Error) as exc:  # Malformed, a NoteError, a bad hex or base64, a codec error
        return failed(name, f"the bundle is malformed where this check reads it: {exc}")
    except Exception as exc:  # a hostile bundle's bytes deep in a decoder: this check fails, the others go on
        return failed(name, f"the bundle could not be read where this check reads it ({type(exc).__name__})")
