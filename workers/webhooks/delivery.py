"""What becomes of a webhook delivery after an attempt: the courier's choices, pure.

An attempt ends in an HTTP status or in no answer at all (refused, reset, timed out). 2xx is
delivered. 410 Gone is the receiver saying it wants no more: the delivery fails and the tenant's
endpoint is disabled (an operator sets it again). A redirect is not followed (the Standard
Webhooks advice: the endpoint should be corrected instead) and counts as a failure. Anything else
is tried again on the schedule below, Standard Webhooks' own shortened to about a day and a half,
with some jitter so that a receiver coming back up is not met by every delivery at once; after the
last, the delivery fails. Every attempt is audited whatever its end.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

# Seconds to wait after attempt n (1-based) failed, before attempt n + 1.
SCHEDULE_S = (5.0, 300.0, 1800.0, 7200.0, 18000.0, 36000.0, 50400.0)
MAX_ATTEMPTS = len(SCHEDULE_S) + 1
JITTER = 0.1  # up to this share of the wait, added


# How an attempt ended: the HTTP status answered, or what kind of failure left it unanswered
# (refused, reset, timed out; never the endpoint's own text).
Attempt = int | str


@dataclass(frozen=True)
class Next:
    """What follows an attempt: its delivery's status (delivered, pending: tried again `after_s`
    from now, or failed), what the attempt came to, and whether the endpoint is disabled."""

    status: str
    outcome: str
    after_s: float = 0.0
    disable_endpoint: bool = False


def outcome_of(attempt: Attempt) -> str:
    return f"HTTP {attempt}" if isinstance(attempt, int) else attempt


def judged(attempt: Attempt, attempts: int, spread: float) -> Next:
    """What follows attempt number `attempts` (1-based) ending as `attempt`; `spread` in [0, 1)
    picks the jitter."""
    outcome = outcome_of(attempt)
    if isinstance(attempt, int) and 200 <= attempt < 300:
        return Next("delivered", outcome)
    if attempt == 410:
        return Next("failed", outcome + ": the receiver asked for no more; the endpoint is disabled", 0.0, True)
    if attempts >= MAX_ATTEMPTS:
        return Next("failed", f"{outcome}, attempt {attempts} of {MAX_ATTEMPTS}: given up")
    return Next("pending", outcome, SCHEDULE_S[attempts - 1] * (1.0 + JITTER * spread))


def origin(url: str) -> str:
    """What logs and the audit log say of an endpoint: its scheme, host and port only. A chat
    tool's incoming-webhook URL carries its credential in the path or query."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or ''}" + (f":{parts.port}" if parts.port else "")
