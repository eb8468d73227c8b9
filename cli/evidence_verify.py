"""`toolgate evidence verify BUNDLE`: a call's evidence bundle (docs/evidence.md) checked offline,
with only public keys: no database, no broker, no deployment (ops/evidence_checks/)."""

from __future__ import annotations

import base64
import binascii
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from toolgate.cli.common import console, fail, literal, print_json

if TYPE_CHECKING:
    from toolgate.contracts.policy_set import PolicySet
    from toolgate.contracts.registry import Registry


def evidence_verify(
    bundle: Annotated[Path, typer.Argument(help="the bundle (toolgate evidence CALL_ID > bundle.json)")],
    as_json: Annotated[bool, typer.Option("--json", help='print {"checks": [...], "ok": bool}')] = False,
    deployment_key: Annotated[
        list[str] | None,
        typer.Option(
            "--deployment-key", help="a deployment public key you trust (base64 or hex), instead of the bundle's"
        ),
    ] = None,
    witness_key: Annotated[
        list[str] | None,
        typer.Option("--witness-key", help="a witness's verifier key (name+id+key) required, not the bundle's"),
    ] = None,
    contracts: Annotated[
        Path | None, typer.Option("--contracts", help="contracts beside the shipped ones, to decide again with")
    ] = None,
    policy: Annotated[
        Path | None, typer.Option("--policy", help="the policy set to decide again with (default: the shipped one)")
    ] = None,
) -> None:
    """Check every signature, hash link and count a call's bundle carries, and make its recorded
    decisions again; one line per check (exit 1 when any failed). Without --deployment-key the
    bundle's own keys are used: that shows it consistent, not who signed it."""
    from toolgate.ops.evidence_checks.run import verify
    from toolgate.ops.evidence_checks.trust import trust_of
    from toolgate.ops.evidence_checks.trust import witness_key as checked_witness
    from toolgate.trust.signed_note import NoteError

    try:
        document = json.loads(bundle.read_bytes())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise fail(f"{bundle}: not a readable JSON bundle ({exc})") from exc
    pinned = [_public_key(text) for text in deployment_key or []]
    try:
        for vkey in witness_key or []:
            checked_witness(vkey)
    except (NoteError, ValueError) as exc:
        raise fail(f"--witness-key: {exc}") from exc
    trust = trust_of(document, pinned, witness_key or [])
    registry, policy_set = _deciders(contracts, policy)
    verdict = verify(document, trust, registry, policy_set)
    if as_json:
        print_json(verdict.as_json())
    else:
        for check, line in zip(verdict.checks, verdict.lines(), strict=True):
            color = {"ok": "green", "failed": "red", "skipped": "yellow"}[check.status]
            console.print(literal(line), style=color, soft_wrap=True)
        unpinned = [
            o
            for o, pinned in (("--deployment-key", trust.deployment_pinned), ("--witness-key", trust.witnesses_pinned))
            if not pinned
        ]
        if unpinned:
            console.print(
                f"keys: the bundle's own, not pinned (pin them with {' and '.join(unpinned)})", style="yellow"
            )
        console.print("ok: nothing failed" if verdict.ok else "FAILED", style="green" if verdict.ok else "red")
    if not verdict.ok:
        raise typer.Exit(1)


def _public_key(text: str) -> bytes:
    try:
        raw = bytes.fromhex(text) if len(text) == 64 else base64.b64decode(text, validate=True)
    except (ValueError, binascii.Error) as exc:
        raise fail(f"--deployment-key {text!r}: not a public key in base64 or hex") from exc
    if len(raw) != 32:
        raise fail(f"--deployment-key {text!r}: an Ed25519 public key is 32 bytes")
    return raw


def _deciders(contracts: Path | None, policy: Path | None) -> tuple[Registry | None, PolicySet | None]:
    """The contracts (the shipped ones, and those of `contracts`) and the policy set (`policy`'s, or
    the shipped one) the decisions are made again with; each decision names the digests it needs."""
    from toolgate.contracts.admission import ContractRefused
    from toolgate.contracts.policy_set import load_policy_set
    from toolgate.contracts.registry import load_registry

    for directory in (contracts, policy):
        if directory is not None and not directory.is_dir():
            raise fail(f"{directory}: not a directory")
    try:
        registry = load_registry(contracts)
        return registry, load_policy_set(registry, policy)
    except ContractRefused as exc:
        raise fail(f"refused: {exc}") from exc
