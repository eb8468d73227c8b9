"""A webhook delivery's signature (Standard Webhooks, asymmetric) and what follows an attempt."""

from __future__ import annotations

import base64

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from toolgate.ops.registry import RegistryError
from toolgate.ops.webhooks import checked_url
from toolgate.trust import webhook_signing
from toolgate.trust.ed25519 import PrivateKey
from toolgate.workers.webhooks.delivery import MAX_ATTEMPTS, SCHEDULE_S, Next, judged, origin

KEY = PrivateKey(b"\x01" * 32)
OLD = PrivateKey(b"\x02" * 32)
BODY = b'{"type":"approval.opened","timestamp":"2026-11-30T14:00:00.000Z","data":{"approval_id":"appr_1"}}'
NOW = 1_790_000_000


def signed(*keys: PrivateKey, at: int = NOW) -> dict[str, str]:
    return webhook_signing.headers(keys or (KEY,), webhook_signing.message_id(42), at, BODY)


def test_the_signature_is_ed25519_over_id_timestamp_and_body_as_any_standard_library_checks_it() -> None:
    headers = signed()
    assert headers["webhook-id"] == "msg_tg42" and headers["webhook-timestamp"] == str(NOW)
    scheme, encoded = headers["webhook-signature"].split(",", 1)
    assert scheme == "v1a"
    # Checked with `cryptography`, not with toolgate's own verifier: the Standard Webhooks content.
    Ed25519PublicKey.from_public_bytes(KEY.public.raw).verify(
        base64.b64decode(encoded), f"msg_tg42.{NOW}.".encode() + BODY
    )
    assert webhook_signing.verified([KEY.public.raw], headers, BODY, NOW)


@pytest.mark.parametrize(
    "change",
    [
        lambda h, b: (h, b.replace(b"appr_1", b"appr_2")),
        lambda h, b: ({**h, "webhook-id": "msg_tg43"}, b),
        lambda h, b: ({**h, "webhook-timestamp": str(NOW + 1)}, b),
        lambda h, b: ({k: v for k, v in h.items() if k != "webhook-signature"}, b),
        lambda h, b: ({**h, "webhook-signature": "v1," + h["webhook-signature"].split(",", 1)[1]}, b),
        lambda h, b: ({**h, "webhook-signature": "v1a,not base64!"}, b),
    ],
    ids=["body", "id", "timestamp", "no-signature", "symmetric-scheme", "garbage"],
)
def test_any_change_to_what_was_signed_fails_verification(change: object) -> None:
    headers, body = change(signed(), BODY)  # type: ignore[operator]
    assert not webhook_signing.verified([KEY.public.raw], headers, body, NOW)


def test_an_old_attempt_is_a_replay_and_another_key_is_not_the_deployment() -> None:
    assert not webhook_signing.verified([KEY.public.raw], signed(), BODY, NOW + webhook_signing.TOLERANCE_S + 1)
    assert webhook_signing.verified([KEY.public.raw], signed(), BODY, NOW + webhook_signing.TOLERANCE_S)
    assert not webhook_signing.verified([OLD.public.raw], signed(), BODY, NOW)


def test_during_a_rotation_every_accepted_key_signs_and_either_verifies() -> None:
    both = signed(KEY, OLD)
    assert len(both["webhook-signature"].split()) == 2
    assert webhook_signing.verified([OLD.public.raw], both, BODY, NOW)
    assert webhook_signing.verified([KEY.public.raw], both, BODY, NOW)


def test_a_webhook_id_never_holds_the_separator() -> None:
    with pytest.raises(ValueError):
        webhook_signing.signed_content("msg.1", NOW, BODY)


def test_2xx_is_delivered_410_disables_the_endpoint_and_the_rest_is_tried_again_then_given_up() -> None:
    assert judged(204, 1, 0.5) == Next("delivered", "HTTP 204")
    gone = judged(410, 1, 0.5)
    assert gone.status == "failed" and gone.disable_endpoint
    assert judged(500, 1, 0.0) == Next("pending", "HTTP 500", SCHEDULE_S[0])
    redirect = judged(302, 2, 0.999)
    assert redirect.status == "pending" and SCHEDULE_S[1] < redirect.after_s < SCHEDULE_S[1] * 1.1
    last = judged("no answer within 10 s", MAX_ATTEMPTS, 0.0)
    assert last.status == "failed" and not last.disable_endpoint and "given up" in last.outcome


def test_an_endpoint_is_named_by_its_origin_only() -> None:
    assert origin("https://hooks.slack.example/services/T0/B0/secret-token?x=1") == "https://hooks.slack.example"
    assert origin("http://127.0.0.1:8123/hook") == "http://127.0.0.1:8123"


@pytest.mark.parametrize(
    "url", ["ftp://example.com/x", "https:///nohost", "https://user:pw@example.com/hook", "example.com/hook"]
)
def test_a_webhook_url_is_http_with_a_host_and_no_credential_in_its_authority(url: str) -> None:
    with pytest.raises(RegistryError):
        checked_url(url)
