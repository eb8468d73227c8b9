"""The approval services' client (toolgate.client): confirmation packets read, signed decisions
published."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, TopicPartition
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from toolgate.client.agent import ToolgateClient
from toolgate.client.calls import random_hex
from toolgate.client.edge import readable
from toolgate.contracts.contract import Contract
from toolgate.contracts.edits import edited_text
from toolgate.schemas.codec import Codec, DecodeError, codec
from toolgate.schemas.models import ApprovalDecision, ApprovalRequest
from toolgate.topics.consumed import read
from toolgate.topics.headers import TRACEPARENT, edge_headers, header, new_traceparent
from toolgate.trust.signing import decision_document, sign


class ApprovalClient(ToolgateClient):
    """For approval services: read confirmation packets, publish signed decisions."""

    def requests(
        self,
        tenants: Iterable[str],
        *,
        follow: bool = False,
        idle_timeout: float = 2.0,
        stop: threading.Event | None = None,
    ) -> Iterator[tuple[ApprovalRequest, str]]:
        """Confirmation packets of the given tenants, each signed by the deployment (a packet
        without that signature is skipped: an approver must only ever see what toolgate holds).
        Following, it ends when `stop` is set, even while no packet arrives."""
        consumer = self._consumer()
        assigned = []
        for tenant in tenants:
            topic = self.topics.name("approvals_requested", tenant)
            assigned += [TopicPartition(topic, p, OFFSET_BEGINNING) for p in self._partitions(consumer, topic)]
        consumer.assign(assigned)
        try:
            last = time.monotonic()
            while (follow or time.monotonic() - last < idle_timeout) and not (stop and stop.is_set()):
                msg = consumer.poll(0.2)
                if msg is None or msg.error():
                    continue
                last = time.monotonic()
                record = readable(read(msg), "approval requests")
                if record is None or not self.genuine(record):
                    continue
                try:
                    packet = codec().decode(record.value or b"", ApprovalRequest)
                except DecodeError:
                    continue
                yield packet, header(record.headers, TRACEPARENT) or ""
        finally:
            consumer.close()

    def decide(
        self,
        packet: ApprovalRequest,
        *,
        approver_id: str,
        key: Ed25519PrivateKey,
        approve: bool,
        reason: str | None = None,
        valid_for_s: int = 300,
        traceparent: str | None = None,
        decision_id: str | None = None,
        edit: Mapping[str, Any] | None = None,
        contract: Contract | None = None,
    ) -> ApprovalDecision:
        """Sign and publish a decision on `packet`; raises toolgate.trust.signing.PacketMismatch (and
        signs nothing) when the packet's payload hash is not that of the arguments it shows.

        `edit` approves edited arguments instead (issue 52, part 3): a JSON object merged over the
        packet's arguments key by key (contracts/edits.py); the decision names the packet's payload
        hash and carries the merged arguments, signed. Raises contracts.edits.EditRefused (signing
        nothing) for an edit that changes nothing or, given the call's `contract`, that does not
        only narrow; approval-wait checks it again either way."""
        from toolgate.trust.signing import check_packet

        check_packet(packet)
        edited = None
        if edit is not None:
            if not approve:
                raise ValueError("an edit approves edited arguments; a denial carries none")
            edited = edited_text(packet.arguments, edit, contract)
        decision = self._signed(packet, approver_id, key, approve, reason, valid_for_s, decision_id, edited)
        self.publish_decision(decision, packet, traceparent)
        return decision

    def decide_many(
        self,
        packets: Sequence[ApprovalRequest],
        *,
        approver_id: str,
        key: Ed25519PrivateKey,
        approve: bool,
        reason: str | None = None,
        valid_for_s: int = 300,
    ) -> list[ApprovalDecision]:
        """One signed decision per packet (each over its own packet, as `decide` signs one),
        published together; the decisions in the packets' order. Raises PacketMismatch, and signs
        nothing at all, when any packet's payload hash is not that of the arguments it shows."""
        from toolgate.trust.signing import check_packet

        for packet in packets:
            check_packet(packet)
        decisions = [self._signed(p, approver_id, key, approve, reason, valid_for_s, None) for p in packets]
        c = codec()
        for decision, packet in zip(decisions, packets, strict=True):
            self._publish(c, decision, packet, None)
        self.flush()
        return decisions

    @staticmethod
    def _signed(
        packet: ApprovalRequest,
        approver_id: str,
        key: Ed25519PrivateKey,
        approve: bool,
        reason: str | None,
        valid_for_s: int,
        decision_id: str | None,
        edited_arguments: str | None = None,
    ) -> ApprovalDecision:
        now = int(time.time() * 1000)
        document = decision_document(
            packet,
            approver_id,
            approve,
            reason,
            decision_id or f"dec_{random_hex(16)}",
            now,
            valid_for_s,
            edited_arguments,
        )
        return sign(document, key)

    def publish_decision(
        self, decision: ApprovalDecision, packet: ApprovalRequest, traceparent: str | None = None
    ) -> None:
        self._publish(codec(), decision, packet, traceparent)
        self.flush()

    def _publish(self, c: Codec, decision: ApprovalDecision, packet: ApprovalRequest, traceparent: str | None) -> None:
        headers = edge_headers(
            traceparent or new_traceparent(), packet.call_id, packet.tenant_id, c.fingerprint_of(ApprovalDecision)
        )
        self.publish_raw(self.topics.approvals_decisions, decision.approval_id.encode(), c.encode(decision), headers)
