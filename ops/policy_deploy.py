"""Operator commands for deployed policy sets (issue 51, parts 4 and 5): `toolgate policy deploy
DIR [--shadow]`, `toolgate policy deployed`, `toolgate policy shadow report|stop`.

A deploy admits the directory's set against the deployed contracts first (a set that is refused
is stored nowhere: every problem named), signs it with the deployment's key that seals now
(toolgate/trust/policy_signing.py; toolgate has no operator key of its own), and stores it
(store/policy_sets.py) with an audit entry (`policy_deployed`) in one transaction. Every policy
worker reads which set is current in its next round's batch and takes it there, once it has
checked the signature and admitted the set against its own contracts (workers/policy/live.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from toolgate.contracts.registry import load_registry
from toolgate.contracts.stored_sets import admit_files, files_of
from toolgate.ops.registry import RegistryError, in_transaction
from toolgate.settings import Settings
from toolgate.store import audit, policy_sets
from toolgate.store.policy_sets import ENFORCING, SHADOW, Deployment, Reported
from toolgate.trust.deployment_keys import deployment_keys
from toolgate.trust.policy_signing import Signed, sign

STAGE = "operator"


@dataclass(frozen=True)
class Deployed:
    deployment_id: int
    role: str
    digest: str | None
    policies: int
    key_id: str
    previous: str | None  # the digest the role had before (None: none deployed, or a shadow stopped)


def deploy(settings: Settings, directory: Path, shadow: bool = False, actor: str = "operator") -> Deployed:
    """Admit, sign, store and audit the set in `directory` as the enforcing set (or the shadow);
    ContractRefused naming every problem when it is refused: nothing is stored."""
    files = files_of(directory)
    admitted = admit_files(files, load_registry(settings.contracts_dir))
    role = SHADOW if shadow else ENFORCING
    return _store(settings, role, files, admitted.digest, len(admitted.cedar.rules), actor)


def stop_shadow(settings: Settings, actor: str = "operator") -> Deployed:
    """End the shadow set: the workers judge no candidate from their next round."""
    return _store(settings, SHADOW, None, None, 0, actor)


def _store(
    settings: Settings, role: str, files: dict[str, str] | None, digest: str | None, policies: int, actor: str
) -> Deployed:
    sealing = deployment_keys(settings).view().sealing

    async def work(conn: psycopg.AsyncConnection[Any]) -> Deployed:
        before = await policy_sets.newest(conn, role)
        if files is None and (before is None or before.digest is None):
            raise RegistryError("no shadow policy set is deployed")
        deployment_id = await policy_sets.next_id(conn)
        signature = sign(Signed(deployment_id, role, digest, actor), sealing.signing_key)
        row = Deployment(deployment_id, role, digest, files, actor, sealing.key_id, signature)
        await policy_sets.insert(conn, row)
        previous = None if before is None else before.digest
        detail = {"deployment": deployment_id, "role": role, "digest": digest, "previous": previous}
        detail |= {"key_id": sealing.key_id, "files": sorted(files or ())}
        action = "policy_deployed" if files is not None else "policy_shadow_stopped"
        await audit.append(conn, [audit.Entry(STAGE, action, actor, None, None, detail)])
        return Deployed(deployment_id, role, digest, policies, sealing.key_id, previous)

    return in_transaction(settings.admin_url, work)


def deployed(settings: Settings, limit: int = 10) -> tuple[dict[str, Deployment], list[Deployment]]:
    """The current set of each role (a shadow's end has no digest) and the newest deployments."""
    with psycopg.connect(settings.database_url) as conn:
        return policy_sets.current_sets(conn), policy_sets.history(conn, limit)


def shadow_report(settings: Settings, since_s: float, examples: int = 3) -> list[Reported]:
    """The shadow sets' disagreements since `since_s` seconds ago, by tool and each side's class."""
    with psycopg.connect(settings.database_url) as conn:
        return policy_sets.report(conn, since_s, examples)


def duration_s(text: str) -> float:
    """`24h`, `30m`, `7d`, `90s` as seconds (RegistryError on anything else)."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    number, unit = text[:-1], text[-1:]
    if unit not in units or not number.isdigit():
        raise RegistryError(f"a duration is a whole number and s, m, h or d (e.g. 24h), not {text!r}")
    return float(int(number) * units[unit])
