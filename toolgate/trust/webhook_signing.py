"""A webhook delivery's signature, in the Standard Webhooks form (standardwebhooks.com), asymmetric.

Three headers go with each POST: `webhook-id` (the delivery's id, the same on every retry, so a
receiver takes an event once), `webhook-timestamp` (the attempt's Unix seconds) and
`webhook-signature`, `v1a,` and the base64 Ed25519 signature of `{id}.{timestamp}.{body}` by the
deployment's key. A receiver verifies it with the deployment's public key (`toolgate secret
status` shows it; clients take it as TOOLGATE_DEPLOYMENT_PUBLIC_KEY), the key that signs the
tenants' edge topics, with any
Standard Webhooks library or with `verified` below; during a key rotation the header carries one
signature a key, space-separated, and any of them verifying is enough.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping

from toolgate.trust.ed25519 import PrivateKey, PublicKey

SCHEME = "v1a"
TOLERANCE_S = 300  # the spec's five minutes either way: an older attempt is a replay


def message_id(delivery_id: int) -> str:
    """The `webhook-id` of a delivery: stable across its attempts, with no `.` in it."""
    return f"msg_tg{delivery_id}"


def signed_content(msg_id: str, timestamp: int, body: bytes) -> bytes:
    if "." in msg_id:
        raise ValueError("a webhook id has no '.'")
    return f"{msg_id}.{timestamp}.".encode() + body


def headers(keys: Iterable[PrivateKey], msg_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The three headers of one attempt, signed by each of `keys` (the current first)."""
    content = signed_content(msg_id, timestamp, body)
    signatures = " ".join(f"{SCHEME},{base64.b64encode(key.sign(content)).decode()}" for key in keys)
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signatures,
        "content-type": "application/json",
    }


def verified(public_keys: Iterable[bytes], received: Mapping[str, str], body: bytes, now: int) -> bool:
    """Whether `body` with the headers `received` (names in lower case) is a delivery signed by one
    of `public_keys`, attempted within TOLERANCE_S of `now`."""
    try:
        msg_id = received["webhook-id"]
        timestamp = int(received["webhook-timestamp"])
        offered = received["webhook-signature"].split()
    except (KeyError, ValueError):
        return False
    if abs(now - timestamp) > TOLERANCE_S or "." in msg_id:
        return False
    content = signed_content(msg_id, timestamp, body)
    keys = [PublicKey(raw) for raw in public_keys]
    for entry in offered:
        scheme, _, encoded = entry.partition(",")
        if scheme != SCHEME:
            continue
        try:
            signature = base64.b64decode(encoded, validate=True)
        except ValueError:
            continue
        if any(key.ok(signature, content) for key in keys):
            return True
    return False
