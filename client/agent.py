"""The agents' client of toolgate's edge topics (confluent-kafka).

    client = ToolgateClient.from_settings()
    sent = client.propose("invoice.fetch", {"invoice_id": "inv_acme0001"},
                          agent_id="billing-agent", user_id="u1", scopes=["invoices:read"])
    obs = client.wait(sent)            # the final Observation of that call

Every proposal is signed with the agent's key (from the local keyring, or an AgentSigner the
caller holds); toolgate takes the tenant and the granted scopes from its registry, never from
the record. An agent with several calls to make at once prepares each and publishes them
together: they are signed under one signature (a Merkle root, `proposal_signing.sign_all`), so
the agent signs once and validation checks once for up to TREE_MAX calls:

    drafts = [client.prepare("invoice.fetch", {"invoice_id": i}, agent_id="billing-agent",
                             user_id="u1", watch=True) for i in ids]
    sent = client.publish(drafts)      # one Proposed each, as `propose` returns

Proposals are keyed by run_id (one run stays in order); observations come back on
the tenant's own topic, keyed by run_id, with the call_id and the digest of the proposal they
answer in headers, signed by the deployment. The client checks that signature (by default) and
the digest, so only toolgate's answer to what it proposed is accepted. A call that waits for
approval first gets an interim observation (status code 202); `wait` returns the final one
unless asked otherwise.

Kafka is the transport, not the record: a broker that loses its topics loses proposals in
flight. So `wait` re-publishes a call that has no final observation yet, byte for byte (the
same call_id, logical operation and idempotency key, the same signature), backing off, until
the call's deadline. toolgate answers a re-published call as the same call: a read runs again,
a write replays its stored result, a held call re-announces its pending approval; none is a
second effect.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence
from typing import Any

from opentelemetry import trace

from toolgate.client.calls import TREE_MAX, Draft, Observed, Proposed, random_hex
from toolgate.client.edge import ignore_delivery, readable
from toolgate.client.observing import Observing
from toolgate.schemas.codec import codec
from toolgate.schemas.models import Principal, ToolProposal
from toolgate.topics.headers import CALL_ID, edge_headers, format_traceparent, header, new_traceparent
from toolgate.topics.producers import Record
from toolgate.trust.agent_keys import AgentSigner

RESEND_CHECK_S = 0.2  # how often a waiting call checks whether re-publishing is due


def _current_traceparent(sample_ratio: float) -> str:
    """The agent's current span, if it traces; else a new trace, sampled at `sample_ratio`
    (every stage follows this decision: a call is traced end to end or not at all)."""
    ctx = trace.get_current_span().get_span_context()
    if ctx.is_valid:
        return format_traceparent(ctx.trace_id, ctx.span_id, ctx.trace_flags.sampled)
    return new_traceparent(sampled=random.random() < sample_ratio)


class ToolgateClient(Observing):
    def signer(self, agent_id: str) -> AgentSigner:
        """The agent's signer from the keyring (its newest key), loaded once."""
        if agent_id not in self._signers:
            if self.keyring is None:
                raise KeyError(f"no keyring to sign as {agent_id}: pass keyring= or signer=")
            self._signers[agent_id] = self.keyring.signer(agent_id)
        return self._signers[agent_id]

    def connect(self, tenant_id: str | None = None, timeout: float = 10.0) -> None:
        """Make now what a first call would make: the records' codec (its schemas compiled, not
        quick: docs/performance.md, "Figures behind the code"), the producer of proposals with the
        topic's metadata, and with `tenant_id` that tenant's observation feed. Without this the
        first `propose` and the first `watch` pay for them; an agent that connects as it starts
        pays once, outside any call."""
        codec()
        producer = self._producers.for_topic(self.topics.proposals)
        producer.list_topics(self.topics.proposals, timeout=timeout)
        if tenant_id is not None:
            self._feed(tenant_id)

    # --- proposing -------------------------------------------------------------------------

    def propose(self, tool: str, arguments: dict[str, Any] | str, *, flush: bool = True, **fields: Any) -> Proposed:
        """Publish one proposal, signed as the agent: `prepare` then `publish`, with `prepare`'s
        arguments (`user_id` and `agent_id` or `signer` at least)."""
        return self.publish([self.prepare(tool, arguments, **fields)], flush=flush)[0]

    def prepare(
        self,
        tool: str,
        arguments: dict[str, Any] | str,
        *,
        agent_id: str | None = None,
        user_id: str,
        tenant_id: str | None = None,
        scopes: Sequence[str] | None = None,
        signer: AgentSigner | None = None,
        run_id: str | None = None,
        workflow_id: str | None = None,
        logical_operation_id: str | None = None,
        idempotency_key: str | None = None,
        version: str = "latest",
        deadline_ms: int | None = None,
        dry_run: bool = False,
        repair_attempt: int = 0,
        call_id: str | None = None,
        compensation_of: str | None = None,
        watch: bool = False,
    ) -> Draft:
        """One proposal, to be signed as the agent (`signer`, or `agent_id`'s key from the
        keyring) when it is published. `tenant_id` and `scopes` default to the agent's own;
        asking for another tenant or more scopes than granted is refused by toolgate, not here.
        With `watch`, remember where the tenant's observation topic ends now, so `wait` cannot
        miss the answer however fast it comes (the client's observation feed for that topic
        keeps it for `wait`)."""
        if signer is None:
            signer = self._keyring_signer(agent_id)
        call_id = call_id or f"call_{random_hex(16)}"
        # Answers come back on the agent's own tenant's topic, whatever tenant the call claims.
        start = self._watch(signer.tenant_id, call_id) if watch else ()
        now = int(time.time() * 1000)
        run_id = run_id or f"run_{random_hex(6)}"
        proposal = ToolProposal(
            call_id=call_id,
            tenant_id=tenant_id or signer.tenant_id,
            principal=Principal(
                user_id=user_id, agent_id=signer.agent_id, scopes=list(signer.scopes if scopes is None else scopes)
            ),
            workflow_id=workflow_id or run_id,
            run_id=run_id,
            logical_operation_id=logical_operation_id or f"op_{random_hex(6)}",
            tool_name=tool,
            tool_version=version,
            arguments=arguments if isinstance(arguments, str) else json.dumps(arguments),
            idempotency_key=idempotency_key,
            deadline_ms=deadline_ms,
            repair_attempt=repair_attempt,
            dry_run=dry_run,
            created_at_ms=now,
            compensation_of=compensation_of,
        )
        return Draft(proposal, signer, start)

    def publish(self, drafts: Sequence[Draft], flush: bool = True) -> list[Proposed]:
        """Sign and publish proposals, in order, each as its own record. The proposals of one
        agent key are signed together, up to TREE_MAX under one signature
        (`proposal_signing.sign_all`): an agent that has several calls to make at once pays for
        one signature, and validation checks one, not one a call."""
        trees: dict[tuple[str, str], list[int]] = {}
        for at, draft in enumerate(drafts):
            trees.setdefault((draft.signer.agent_id, draft.signer.key_id), []).append(at)
        signed: dict[int, tuple[ToolProposal, str]] = {}
        for members in trees.values():
            signer = drafts[members[0]].signer
            for start in range(0, len(members), TREE_MAX):
                tree = members[start : start + TREE_MAX]
                signed.update(zip(tree, signer.sign_all([drafts[at].proposal for at in tree]), strict=True))
        proposed = [
            self._send(*signed[at], draft.signer.tenant_id, draft.start_offsets) for at, draft in enumerate(drafts)
        ]
        if flush:
            self.flush()
        return proposed

    def _keyring_signer(self, agent_id: str | None) -> AgentSigner:
        if agent_id is None:
            raise ValueError("propose needs agent_id (a key in the keyring) or signer")
        return self.signer(agent_id)

    def _send(
        self,
        proposal: ToolProposal,
        proposal_digest: str,
        answer_tenant: str,
        start: tuple[tuple[int, int], ...],
    ) -> Proposed:
        """Publish a signed proposal with its edge headers; remember it until it is answered."""
        traceparent = _current_traceparent(self.trace_sample_ratio)
        fingerprint = codec().fingerprint_of(ToolProposal)
        record = Record(
            self.topics.proposals,
            proposal.run_id.encode(),
            codec().encode(proposal),
            edge_headers(traceparent, proposal.call_id, proposal.tenant_id, fingerprint),
        )
        proposed = Proposed(
            proposal.call_id,
            proposal.run_id,
            traceparent,
            proposal.created_at_ms,
            start,
            answer_tenant,
            proposal_digest,
            record,
            proposal.deadline_ms,
            self.resend_within_ms,
        )
        # Remembered before it is published: a feed may hear its answer before publish returns.
        self._unanswered.add(proposed, time.monotonic())
        self.publish_record(record)
        return proposed

    def resend(self, proposed: Proposed) -> None:
        """Publish a proposal again, byte for byte, without waiting for the broker: a resend
        that cannot be delivered is sent again later, so its failure is not an error here."""
        if proposed.record is None:
            raise ValueError(f"{proposed.call_id} was not proposed by this client: nothing to re-publish")
        self.publish_record(proposed.record, on_delivery=ignore_delivery)

    # --- waiting ---------------------------------------------------------------------------

    def wait(self, proposed: Proposed, timeout: float = 60.0, final: bool = True, resend: bool = True) -> Observed:
        """The observation of one proposed call (its final one unless `final` is False): signed
        by the deployment and naming the digest of exactly what was proposed.

        With `resend`, a call with no final answer after RESEND_FIRST_S is re-published (module
        docstring), and with it every other call of this client still unanswered and due:
        what lost one call (a broker that came back empty) lost its neighbours too, and an
        agent that waits for its calls one by one should not pay the wait once per call."""
        feed = self._feeds.get(proposed.tenant_id)
        if feed is None or not feed.watches(proposed.call_id):
            return self._wait_reading(proposed, time.monotonic() + timeout, final, resend)
        unanswered = self._unanswered
        stop_at = time.monotonic() + timeout

        def wanted(seen: Observed) -> bool:
            return seen.proposal_digest == proposed.proposal_digest and (seen.is_final or not final)

        while (now := time.monotonic()) < stop_at:
            if resend and unanswered.due(proposed.call_id, now):
                for again in unanswered.take_due(now):
                    self.resend(again)
            seen = feed.take(proposed.call_id, wanted, min(RESEND_CHECK_S, stop_at - now))
            if seen is not None:
                if seen.is_final:
                    feed.forget(proposed.call_id)
                return seen
            if not feed.watches(proposed.call_id):  # forgotten: the feed held too many calls
                return self._wait_reading(proposed, stop_at, final, resend)
        raise TimeoutError(f"no observation for {proposed.call_id} within {timeout}s")

    def _wait_reading(self, proposed: Proposed, stop_at: float, final: bool, resend: bool) -> Observed:
        """`wait` for a call no feed of this client holds: read the topic from where it ended
        when the call was proposed (else from its start) with a consumer of its own."""
        consumer = self._consumer()
        topic = self.topics.name("observations", proposed.tenant_id)
        unanswered = self._unanswered
        try:
            for found in self._reading(consumer, topic, self._starts(consumer, topic, proposed.start_offsets)):
                if (now := time.monotonic()) >= stop_at:
                    break
                if resend and unanswered.due(proposed.call_id, now):
                    for again in unanswered.take_due(now):
                        self.resend(again)
                if found is None or (record := readable(found, "wait")) is None:
                    continue
                cid = header(record.headers, CALL_ID) or ""
                if cid != proposed.call_id and cid not in unanswered:
                    continue
                seen = self._observed(record, None, None)
                if seen is None:
                    continue
                unanswered.heard(seen, time.monotonic())
                if seen.call_id != proposed.call_id or seen.proposal_digest != proposed.proposal_digest:
                    continue  # another call's, or an answer to another proposal that reused this call_id
                if seen.is_final or not final:
                    return seen
        finally:
            consumer.close()
        raise TimeoutError(f"no observation for {proposed.call_id} by the deadline")
