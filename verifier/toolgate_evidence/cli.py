"""The checks in order, the verdict, and the command line."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .approvals import approval_quorum, approval_signatures, approval_state_version, execution_once
from .base import FAILED, FORMAT, OK, SKIPPED, Failed, Skipped
from .bundle import Bundle, parse_json, trusted_keys
from .calls import call_digest, call_payload_hash, proposal_arguments, proposal_document, proposal_signature
from .notes import b64
from .published import (
    audit_inclusion,
    audit_rows,
    checkpoint_cosignatures,
    checkpoint_signature,
    decisions_rederived,
    observation_signature,
)

CHECKS: tuple[tuple[str, Callable[[Bundle], str]], ...] = (
    ("proposal.signature", proposal_signature),
    ("proposal.document", proposal_document),
    ("proposal.arguments", proposal_arguments),
    ("call.payload_hash", call_payload_hash),
    ("call.digest", call_digest),
    ("approval.signatures", approval_signatures),
    ("approval.state_version", approval_state_version),
    ("approval.quorum", approval_quorum),
    ("execution.once", execution_once),
    ("observation.signature", observation_signature),
    ("audit.rows", audit_rows),
    ("audit.inclusion", audit_inclusion),
    ("checkpoint.signature", checkpoint_signature),
    ("checkpoint.cosignatures", checkpoint_cosignatures),
    ("decisions.rederived", decisions_rederived),
)


MALFORMED = (KeyError, TypeError, ValueError, AttributeError, IndexError)


def run(check: Callable[[Bundle], str], bundle: Bundle) -> tuple[str, str]:
    try:
        return OK, check(bundle)
    except Skipped as exc:
        return SKIPPED, str(exc)
    except Failed as exc:
        return FAILED, str(exc)
    except MALFORMED as exc:  # a field missing or of the wrong type: what it should prove does not hold
        return FAILED, f"the bundle is malformed where this check reads it ({type(exc).__name__}: {exc})"
    except Exception as exc:  # a hostile bundle deep in a parser: this check fails, the others go on
        return FAILED, f"the bundle could not be read where this check reads it ({type(exc).__name__})"


def verify(data: Any, deployment: Sequence[bytes] = (), witnesses: Sequence[str] = ()) -> dict[str, Any]:
    """The verdict on a parsed bundle: {"checks": [{"name", "status", "detail"}], "ok": bool}."""
    try:
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise Failed(f"the document is not a {FORMAT} bundle")
        bundle: Bundle | str = Bundle(data, trusted_keys(data, deployment, witnesses))
    except (Failed, *MALFORMED) as exc:
        bundle = str(exc)
    checks = []
    for name, check in CHECKS:
        status, detail = (FAILED, bundle) if isinstance(bundle, str) else run(check, bundle)
        checks.append({"name": name, "status": status, "detail": detail})
    return {"checks": checks, "ok": all(c["status"] != FAILED for c in checks)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Verify a toolgate evidence bundle offline.")
    parser.add_argument("bundle", help="the bundle's file (- for standard input)")
    parser.add_argument("--json", action="store_true", help='print {"checks": [...], "ok": bool}')
    parser.add_argument(
        "--deployment-key", action="append", default=[], metavar="B64", help="trust only this deployment key"
    )
    parser.add_argument("--witness-vkey", action="append", default=[], metavar="VKEY", help="require this witness")
    args = parser.parse_args(argv)
    try:
        text = sys.stdin.buffer.read() if args.bundle == "-" else Path(args.bundle).read_bytes()
        pinned = [b64(k, "--deployment-key") for k in args.deployment_key]
        data = parse_json(text)
    except (OSError, ValueError, RecursionError, Failed) as exc:
        print(f"toolgate_evidence: the bundle cannot be read: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    verdict = verify(data, pinned, args.witness_vkey)
    if args.json:
        print(json.dumps(verdict, indent=2))
    else:
        for c in verdict["checks"]:
            print(f"{c['status'].upper() if c['status'] == FAILED else c['status']:8} {c['name']}: {c['detail']}")
        if not pinned or not args.witness_vkey:
            print(
                "note: keys not pinned (--deployment-key, --witness-vkey) are the bundle's own: they prove "
                "consistency, not who signed; compare them with the ones the deployment publishes"
            )
    return 0 if verdict["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
