"""The console's pure judgments: whether an invitation may still be used, whether a session is
alive, whether a POST carries its session's CSRF token and comes from the console's own origin,
and the attributes of the session cookie. No I/O, no clock: the time is passed in (the
database's own `now()`, read with the row)."""

from __future__ import annotations

import datetime as dt
import hmac
import ipaddress
from dataclasses import dataclass
from typing import Protocol

SESSION_COOKIE = "toolgate_console"
LOGIN_CONTEXT = b"toolgate-console-login\n"  # what a login signs: this, the origin, a newline, the challenge


class Invitation(Protocol):
    @property
    def expires_at(self) -> dt.datetime: ...
    @property
    def used_at(self) -> dt.datetime | None: ...


class Session(Protocol):
    @property
    def expires_at(self) -> dt.datetime: ...
    @property
    def approver_active(self) -> bool: ...


def invitation_refusal(invitation: Invitation | None, now: dt.datetime | None) -> str | None:
    """Why an invitation cannot be used now (None: it can): unknown, used, or expired."""
    if invitation is None or now is None:
        return "this invitation is not known"
    if invitation.used_at is not None:
        return "this invitation has been used already"
    if invitation.expires_at <= now:
        return "this invitation has expired"
    return None


def session_alive(session: Session | None, now: dt.datetime) -> bool:
    """A session counts only before its expiry, and only while its approver is active."""
    return session is not None and session.approver_active and now < session.expires_at


def csrf_ok(expected: str, given: str | None) -> bool:
    """The CSRF token a POST carries is its session's (compared in constant time)."""
    return bool(expected) and given is not None and hmac.compare_digest(expected.encode(), given.encode())


def origin_ok(origin: str | None, referer: str | None, own: str) -> bool:
    """A POST comes from the console's own origin: its Origin header is it (a browser sends one
    on every POST), or, lacking one, its Referer starts with it. Neither: refused."""
    if origin is not None:
        return origin == own
    return referer is not None and (referer == own or referer.startswith(own + "/"))


def loopback(host: str) -> bool:
    """Whether the console listens only on this machine (then its cookie may lack Secure: a
    browser treats http://127.0.0.1 and localhost as a secure context)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Cookie:
    """The session cookie's attributes."""

    secure: bool
    max_age: int
    httponly: bool = True
    samesite: str = "Strict"
    path: str = "/"


def cookie_attributes(host: str, max_age_s: int) -> Cookie:
    """HttpOnly, SameSite=Strict, path /, and Secure unless the console listens on loopback."""
    return Cookie(secure=not loopback(host), max_age=max_age_s)


def login_message(origin: str, challenge: bytes) -> bytes:
    """The bytes a login signs: a context no decision document can start with, the console's
    origin (a signature made for one console does not log in to another) and the challenge."""
    return LOGIN_CONTEXT + origin.encode() + b"\n" + challenge
