"""Kafka headers on edge records: W3C traceparent, call_id, tenant_id and the schema
fingerprint, so a reader can route, trace and decode a record without opening it; and a
record's `Address`, the key and those headers built once from the call it is about."""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

TRACEPARENT = "traceparent"
CALL_ID = "call_id"
TENANT_ID = "tenant_id"
SCHEMA = "toolgate-schema"
REPLAY_OF = "toolgate-replay-of"
PROPOSAL_DIGEST = "toolgate-proposal"  # the digest of the signed proposal an observation answers

Headers = list[tuple[str, bytes]]
# A record's headers as confluent-kafka types them: what a consumer hands back is always a list
# of (key, bytes) pairs; the type also allows what a producer may be given (a dict, text values).
RawHeaders = Mapping[str, str | bytes | None] | Iterable[tuple[str, str | bytes | None]] | None


def edge_headers(
    traceparent: str, call_id: str, tenant_id: str, fingerprint: bytes, proposal_digest: str = ""
) -> Headers:
    headers = [
        (TRACEPARENT, traceparent.encode()),
        (CALL_ID, call_id.encode()),
        (TENANT_ID, tenant_id.encode()),
        (SCHEMA, fingerprint.hex().encode()),
    ]
    if proposal_digest:
        headers.append((PROPOSAL_DIGEST, proposal_digest.encode()))
    return headers


class OfCall(Protocol):
    """Any record that names a call and its tenant (a Call, a proposal, a result)."""

    @property
    def call_id(self) -> str: ...
    @property
    def tenant_id(self) -> str: ...


@dataclass(frozen=True)
class Address:
    """Where an edge record goes in its topic and what its headers say of it: its key (what the
    topic is keyed by, topics/catalog.py), the trace it continues, its call and tenant, and the
    digest of the proposal it answers (an observation's; empty for any other record)."""

    key: str
    traceparent: str
    call_id: str
    tenant_id: str
    proposal_digest: str = ""

    @classmethod
    def of(cls, call: OfCall, traceparent: str, key: str, proposal_digest: str = "") -> Address:
        """The address of a record about `call`, continuing `traceparent`, keyed by `key`."""
        return cls(key, traceparent, call.call_id, call.tenant_id, proposal_digest)

    def headers(self, fingerprint: bytes) -> Headers:
        """The edge headers of a record of the schema with `fingerprint`, sent to this address."""
        return edge_headers(self.traceparent, self.call_id, self.tenant_id, fingerprint, self.proposal_digest)


def header(headers: RawHeaders, name: str) -> str | None:
    for key, value in headers.items() if isinstance(headers, Mapping) else headers or ():
        if key == name and value is not None:
            if isinstance(value, str):
                return value
            try:
                return value.decode()
            except UnicodeDecodeError:
                return None
    return None


def pairs(headers: RawHeaders) -> list[tuple[str, bytes | None]]:
    """A record's headers as (key, bytes) pairs, as a consumed record's already are."""
    items = headers.items() if isinstance(headers, Mapping) else headers or ()
    return [(key, value.encode() if isinstance(value, str) else value) for key, value in items]


_DECIMAL = re.compile(r"[0-9]{1,20}")


def header_int(headers: RawHeaders, name: str, *, default: int, low: int, high: int) -> int:
    """An integer header, or `default` when it is missing, not a decimal integer or out of range:
    a header is whatever its producer wrote. Only ASCII digits count: `str.strip` and `int` each
    have their own (different) idea of Unicode whitespace."""
    text = header(headers, name)
    if text is None or not _DECIMAL.fullmatch(text.strip(" ")):
        return default
    value = int(text.strip(" "))
    return value if low <= value <= high else default


def new_traceparent(sampled: bool = True) -> str:
    """A fresh W3C traceparent for a call that arrives without one."""
    ids = secrets.token_hex(24)
    return f"00-{ids[:32]}-{ids[32:]}-{'01' if sampled else '00'}"


def format_traceparent(trace_id: int, span_id: int, sampled: bool) -> str:
    """The W3C traceparent of a span, from its ids as OpenTelemetry holds them."""
    return f"00-{trace_id:032x}-{span_id:016x}-{'01' if sampled else '00'}"


def trace_id_of(traceparent: str) -> str:
    parts = traceparent.split("-")
    return parts[1] if len(parts) == 4 and len(parts[1]) == 32 else ""


def as_pairs(headers: Sequence[tuple[str, bytes | None]] | None) -> Headers:
    return [(k, v if v is not None else b"") for k, v in headers or ()]
