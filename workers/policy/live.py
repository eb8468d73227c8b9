"""The policy sets a policy worker decides with, changed while it runs (issue 51, parts 4 and 5).

The worker starts with the set of TOOLGATE_POLICY_DIR (the shipped `contracts/cedar/` by
default). Operators deploy sets (`toolgate policy deploy`, ops/policy_deploy.py) into
`toolgate.policy_deployments`, and the newest deployment of a role is that role's set: the
enforcing one decides, a shadow one is judged beside it. So a deployed set, once taken, replaces
the directory's, in a worker that starts after it too.

Every round's one batch also reads which deployment is current for each role (`statement`, two
rows at most: no round trip of its own). When that is not what the worker holds (nor one it
refused before), the handler rolls the round's transaction back, `refresh`es, and starts the
round again: every round is decided wholly by one set, and a round that begins after a
deployment committed is decided by the set it deployed. A deployment is taken only when its
signature verifies (toolgate/trust/policy_signing.py, with the deployment's keys this worker
trusts) and its files are admitted against this worker's own contracts under the digest they
name; otherwise the worker keeps the set it holds, says why in its log, and counts it
(`toolgate.policy.sets_refused`, by role). A row is never believed because it is in the table.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from opentelemetry.metrics import Meter
from psycopg import AsyncConnection

from toolgate.contracts.admission import ContractRefused
from toolgate.contracts.policy_set import PolicySet
from toolgate.contracts.registry import Registry
from toolgate.contracts.stored_sets import admit_files
from toolgate.secrets import SecretMissing
from toolgate.settings import Settings
from toolgate.store import batch, policy_sets
from toolgate.store.policy_sets import ENFORCING, SHADOW, Deployment
from toolgate.telemetry.setup import meter
from toolgate.trust.checkpoint_keys import TrustedKeys
from toolgate.trust.deployment_keys import deployment_keys
from toolgate.trust.ed25519 import PublicKey
from toolgate.trust.keyset import KeysetError
from toolgate.trust.policy_signing import Signed, verified
from toolgate.workers.policy.case import Allow, Deny, Usage
from toolgate.workers.policy.shadow import ShadowRound

log = logging.getLogger("toolgate.policy")


class LiveSets:
    """The enforcing set and the shadow set (if any) a policy worker holds, and which deployment
    each came from (None: the worker's own directory; no shadow)."""

    def __init__(self, registry: Registry, settings: Settings, enforcing: PolicySet, instruments: Meter | None = None):
        self.registry, self.settings = registry, settings
        self.enforcing: PolicySet = enforcing
        self.shadow: PolicySet | None = None
        self.held: dict[str, int | None] = {ENFORCING: None, SHADOW: None}
        self.refused: set[int] = set()
        m = instruments or meter()
        self._refusals = m.create_counter("toolgate.policy.sets_refused", description="deployed sets not taken")
        self._disagreements = m.create_counter(
            "toolgate.policy.shadow_disagreements", description="calls a shadow set decided otherwise"
        )

    def statement(self) -> batch.Statement:
        """The round's read of the current deployments (`changed` reads its result)."""
        return policy_sets.current_statement()

    def changed(self, result: batch.Result) -> dict[str, int]:
        """The deployments to take before this round: current, and neither held nor refused."""
        current = policy_sets.current(result)
        return {r: i for r, i in current.items() if i != self.held[r] and i not in self.refused}

    async def refresh(self, conn: AsyncConnection[Any], wanted: dict[str, int]) -> PolicySet:
        """Roll back the round's transaction, take each wanted deployment that proves itself and
        refuse the others; the enforcing set."""
        found = await policy_sets.fetched_instead(conn, list(wanted.values()))
        for role, deployment_id in wanted.items():
            deployment = found.get(deployment_id)
            try:
                if deployment is None or deployment.role != role:
                    raise ContractRefused(f"deployment {deployment_id} is not a {role} set")
                self._take(deployment)
            except ContractRefused as exc:
                self.refused.add(deployment_id)
                self._refusals.add(1, {"role": role})
                log.error(
                    "policy deployment %s (%s) not taken; the %s set held stays in force: %s",
                    deployment_id,
                    role,
                    role,
                    exc,
                    extra={"action": "policy_set_refused", "stage": "policy"},
                )
        return self.enforcing

    def _take(self, deployment: Deployment) -> None:
        signed = Signed(deployment.id, deployment.role, deployment.digest, deployment.deployed_by)
        if not verified(signed, deployment.key_id, deployment.signature, self._trusted()):
            raise ContractRefused(f"its signature is not the deployment's (key {deployment.key_id})")
        if deployment.files is None:  # a shadow's end, signed
            self.shadow, self.held[SHADOW] = None, deployment.id
            log.info("shadow policy set stopped", extra={"action": "policy_shadow_stopped", "stage": "policy"})
            return
        admitted = admit_files(deployment.files, self.registry, deployment.digest)
        if deployment.role == ENFORCING:
            self.enforcing = admitted
        else:
            self.shadow = admitted
        self.held[deployment.role] = deployment.id
        log.info(
            "policy set %s taken as the %s set (deployment %s)",
            admitted.digest,
            deployment.role,
            deployment.id,
            extra={"action": "policy_set_taken", "stage": "policy"},
        )

    def _trusted(self) -> TrustedKeys:
        try:
            keys = deployment_keys(self.settings).public_keys(retired=True)
        except (SecretMissing, KeysetError, ValueError, OSError) as exc:
            raise ContractRefused(f"no deployment keys to check its signature with ({type(exc).__name__})") from exc
        return TrustedKeys(PublicKey(raw) for raw in keys)

    def shadow_round(self, used: Usage) -> ShadowRound | None:
        """The round's shadow, when a shadow set is held (none: the shadow costs nothing)."""
        return None if self.shadow is None else ShadowRound(self.shadow, used)

    def disagreements(
        self, shadow: ShadowRound, decided: Sequence[Allow | Deny], *judging: Any
    ) -> list[tuple[str | int, ...]]:
        """The shadow's disagreements with the enforcing set's `decided` (ShadowRound.disagreements
        with `judging`). A shadow that fails to judge changes nothing: none, said in the log."""
        try:
            return shadow.disagreements(self.enforcing.digest, decided, *judging)
        except Exception as exc:  # the candidate's failure must never fail the enforcing round
            self._refusals.add(1, {"role": SHADOW})
            log.error(
                "the shadow policy set %s could not judge a round; the round is decided as it was: %s",
                shadow.set.digest,
                type(exc).__name__,
                extra={"action": "policy_shadow_failed", "stage": "policy"},
            )
            return []

    def count(self, rows: list[tuple[str | int, ...]]) -> None:
        """Count a committed round's disagreements, by tool and each side's class."""
        for row in rows:
            labels = {"tool": str(row[2]), "enforcing_class": str(row[6]), "shadow_class": str(row[9])}
            self._disagreements.add(1, labels)
