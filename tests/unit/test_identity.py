"""Who asked: validation's first gate, every row of its table."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.factories import proposal
from toolgate.schemas.models import Principal, ToolProposal
from toolgate.trust.ed25519 import PrivateKey
from toolgate.trust.merkle import CheckedRoots
from toolgate.trust.proposal_signing import ROOT_PURPOSE, digest, sign, sign_all, signed_bytes
from toolgate.trust.signing import new_key
from toolgate.workers.runtime.freshness import Bound
from toolgate.workers.validation.identity import (
    AgentKey,
    Proven,
    Refused,
    RegisteredAgent,
    Unproven,
    authenticate,
)

NOW = 1_700_000_000_000
WINDOW = Bound(max_age_ms=900_000, future_ms=60_000)
KEY, OTHER = PrivateKey.of(new_key()), PrivateKey.of(new_key())


def agent(active: bool = True, key_active: bool = True, tenant: str = "acme") -> RegisteredAgent:
    return RegisteredAgent(
        "agent_1",
        tenant,
        frozenset({"invoices:read", "invoices:write"}),
        active,
        {"k_1": AgentKey(KEY.public, key_active), "k_old": AgentKey(OTHER.public, False)},
    )


def signed(key: Any = KEY, key_id: str = "k_1", **overrides: Any) -> ToolProposal:
    scopes = overrides.pop("scopes", ["invoices:read"])
    p = proposal(
        "invoice.fetch",
        {"invoice_id": "inv_acme0001"},
        principal=Principal(user_id="u", agent_id="agent_1", scopes=scopes),
        created_at_ms=overrides.pop("created_at_ms", NOW),
        **overrides,
    )
    return sign(p, key_id, key)


UNPROVEN = [
    ("unsigned", proposal("invoice.fetch", "{}"), agent()),
    ("unknown_agent", signed(), None),
    ("unknown_key", signed(key_id="k_never"), agent()),
    ("revoked_agent", signed(), agent(active=False)),
    ("revoked_key", signed(), agent(key_active=False)),
    ("revoked_key", signed(OTHER, "k_old"), agent()),
    ("bad_signature", signed(OTHER), agent()),
    ("bad_signature", signed().model_copy(update={"arguments": '{"invoice_id": "inv_globex0001"}'}), agent()),
]


@pytest.mark.parametrize(
    ("code", "p", "registered"), UNPROVEN, ids=[f"{c}-{i}" for i, (c, _, _) in enumerate(UNPROVEN)]
)
def test_what_proves_nobody_is_unproven(code: str, p: ToolProposal, registered: RegisteredAgent | None) -> None:
    outcome = authenticate(p, registered, NOW, WINDOW)
    assert isinstance(outcome, Unproven) and outcome.code == code


def test_a_signed_claim_of_another_tenant_is_refused_to_the_agents_own_tenant() -> None:
    p = signed(tenant_id="globex")
    outcome = authenticate(p, agent(), NOW, WINDOW)
    assert outcome == Refused("acme", "tenant_mismatch", "agent agent_1 acts for tenant acme, not globex", digest(p))


@pytest.mark.parametrize(
    ("created_at", "code"),
    [(NOW - 900_001, "stale_proposal"), (NOW + 60_001, "future_proposal")],
)
def test_a_proposal_outside_the_time_window_is_refused(created_at: int, code: str) -> None:
    outcome = authenticate(signed(created_at_ms=created_at), agent(), NOW, WINDOW)
    assert isinstance(outcome, Refused) and outcome.code == code and outcome.tenant_id == "acme"


@pytest.mark.parametrize("created_at", [NOW - 900_000, NOW, NOW + 60_000])
def test_the_window_edges_are_inside(created_at: int) -> None:
    assert isinstance(authenticate(signed(created_at_ms=created_at), agent(), NOW, WINDOW), Proven)


def test_proven_takes_tenant_from_the_registry_and_scopes_within_the_grant() -> None:
    p = signed(scopes=["payments:charge", "invoices:write", "invoices:read", "invoices:write"])
    outcome = authenticate(p, agent(), NOW, WINDOW)
    assert outcome == Proven("acme", ("invoices:write", "invoices:read"), digest(p), signed_bytes(p))


def test_a_rotated_agent_may_sign_with_any_active_key() -> None:
    newer = PrivateKey.of(new_key())
    registered = RegisteredAgent(
        "agent_1",
        "acme",
        frozenset({"invoices:read"}),
        True,
        {"k_1": AgentKey(KEY.public, True), "k_2": AgentKey(newer.public, True)},
    )
    assert isinstance(authenticate(signed(), registered, NOW, WINDOW), Proven)
    assert isinstance(authenticate(signed(newer, "k_2"), registered, NOW, WINDOW), Proven)


def test_proposals_signed_together_are_proven_one_by_one_and_a_revoked_key_stays_revoked() -> None:
    calls = [
        proposal(
            "invoice.fetch",
            {"invoice_id": "inv_acme0001"},
            principal=Principal(user_id="u", agent_id="agent_1", scopes=["invoices:read"]),
            created_at_ms=NOW,
            call_id=f"call_{i}",
        )
        for i in range(3)
    ]
    together = [p for p, _ in sign_all(calls, "k_1", KEY)]
    roots = CheckedRoots(ROOT_PURPOSE)
    assert all(isinstance(authenticate(p, agent(), NOW, WINDOW, roots), Proven) for p in together)
    # The root is remembered, but revoking the key still refuses every proposal under it.
    refused = authenticate(together[0], agent(key_active=False), NOW, WINDOW, roots)
    assert isinstance(refused, Unproven) and refused.code == "revoked_key"
    forged = together[1].model_copy(update={"arguments": '{"invoice_id": "inv_globex0001"}'})
    assert authenticate(forged, agent(), NOW, WINDOW, roots) == Unproven(
        "bad_signature", "the signature does not verify against key k_1 of agent_1"
    )
