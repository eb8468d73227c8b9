"""The operators' listings (`agents list`, `approvers list`, `approvals list`, `webhooks
deliveries`, `agents tokens`): each a store's rows as ops/registry.as_listed shows them, under the
names `--json` has always printed, in the same order, a timestamp in UTC text."""

from __future__ import annotations

import datetime as dt
from typing import Any, cast

import pytest

from toolgate.ops import agent_tokens, agents, approvals, approvers, webhooks
from toolgate.settings import Settings
from toolgate.store import agents as agent_rows
from toolgate.store import approvals as approval_rows
from toolgate.store import approvers as approver_rows
from toolgate.store import webhooks as webhook_rows
from toolgate.trust.agent_keys import key_id_of

AT = dt.datetime(2026, 11, 30, 21, 15, 7, tzinfo=dt.timezone(dt.timedelta(hours=1)))
AT_TEXT = "2026-11-30 20:15:07 UTC"
SETTINGS = cast(Settings, type("S", (), {"database_url": "postgresql://nowhere"})())


def read_gives(monkeypatch: pytest.MonkeyPatch, module: Any, *rows: Any) -> None:
    """The store read of `module` answers `rows` (what Postgres would: the listing is pure)."""
    monkeypatch.setattr(module, "read", lambda _url, _query, *_args: list(rows))


def test_agents_are_listed_under_their_names(monkeypatch: pytest.MonkeyPatch) -> None:
    read_gives(monkeypatch, agents, agent_rows.Listed("a1", "t1", ["s:read"], "active", AT, ["k_1"], ["k_0"]))
    (row,) = agents.list_agents(SETTINGS)
    assert list(row.items()) == [
        ("agent", "a1"),
        ("tenant", "t1"),
        ("scopes", ["s:read"]),
        ("status", "active"),
        ("created_at", AT_TEXT),
        ("active_keys", ["k_1"]),
        ("revoked_keys", ["k_0"]),
    ]


def test_approvers_are_listed_with_their_key_id_never_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    key = b"\x07" * 32
    read_gives(
        monkeypatch, approvers, approver_rows.Listed("bob", "active", ["HIGH"], ["ops"], AT, key, ["t1"], ["u1"])
    )
    (row,) = approvers.list_approvers(SETTINGS)
    assert list(row.items()) == [
        ("approver", "bob"),
        ("status", "active"),
        ("risk_classes", ["HIGH"]),
        ("groups", ["ops"]),
        ("created_at", AT_TEXT),
        ("key_id", key_id_of(key)),
        ("tenants", ["t1"]),
        ("acts_as", ["u1"]),
    ]


def test_approvals_are_listed_under_their_names(monkeypatch: pytest.MonkeyPatch) -> None:
    ticket = approval_rows.Listed("ap_1", "PENDING", "mail.send", "1.0.0", "HIGH", "t1", 2, 1, AT, AT, "c1")
    read_gives(monkeypatch, approvals, ticket)
    (row,) = approvals.list_approvals(SETTINGS, None)
    assert list(row.items()) == [
        ("approval_id", "ap_1"),
        ("status", "PENDING"),
        ("tool", "mail.send"),
        ("version", "1.0.0"),
        ("risk_class", "HIGH"),
        ("tenant", "t1"),
        ("required", 2),
        ("approved", 1),
        ("created_at", AT_TEXT),
        ("expires_at", AT_TEXT),
        ("call_id", "c1"),
    ]


@pytest.mark.parametrize(("status", "due"), [("pending", AT_TEXT), ("delivered", None)])
def test_deliveries_are_listed_with_when_a_pending_one_is_due(
    monkeypatch: pytest.MonkeyPatch, status: str, due: str | None
) -> None:
    read_gives(
        monkeypatch, webhooks, webhook_rows.Delivery(7, "t1", "approval.opened", "ap_1", status, 1, None, AT, AT)
    )
    (row,) = webhooks.list_deliveries(SETTINGS, None, None, 50)
    assert list(row.items()) == [
        ("delivery", 7),
        ("tenant", "t1"),
        ("event", "approval.opened"),
        ("approval", "ap_1"),
        ("status", status),
        ("attempts", 1),
        ("last_outcome", None),
        ("created_at", AT_TEXT),
        ("due_at", due),
    ]


def test_tokens_are_listed_by_id_with_when_they_were_revoked(monkeypatch: pytest.MonkeyPatch) -> None:
    read_gives(
        monkeypatch,
        agent_tokens,
        agent_rows.Token("tk_1", "revoked", AT, AT),
        agent_rows.Token("tk_2", "active", AT, None),
    )
    monkeypatch.setattr(agent_tokens, "_registered", lambda *_args, **_kwargs: "t1")
    assert agent_tokens.listed(SETTINGS, "a1") == [
        {"token_id": "tk_1", "status": "revoked", "created_at": AT_TEXT, "revoked_at": AT_TEXT},
        {"token_id": "tk_2", "status": "active", "created_at": AT_TEXT, "revoked_at": None},
    ]
