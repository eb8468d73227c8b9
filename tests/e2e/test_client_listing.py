"""A client's listing of observations (`ToolgateClient.observations`, client/observing.py) through
the session's `toolgate up`: read to the end of every partition of the tenant's topic as the
broker tells it, not until the topic has been quiet for a while, so a listing that waits for no
late ones (`idle_timeout=0`) still holds every observation already there."""

from __future__ import annotations

import dataclasses
import uuid

from ..conftest import Pipeline


def test_a_listing_reads_every_partition_to_its_end(pipeline: Pipeline) -> None:
    runs = [f"run_{uuid.uuid4().hex[:10]}" for _ in range(8)]  # keyed by run: spread over the partitions
    sent = [pipeline.propose("invoice.fetch", {"invoice_id": "inv_acme0001"}, run_id=run) for run in runs]
    for s in sent:
        pipeline.wait(s)
    wanted = {s.call_id for s in sent}
    listed = list(pipeline.client.observations(tenant_id="acme", call_ids=wanted, idle_timeout=0))
    assert {o.call_id for o in listed if o.is_final} == wanted
    assert len({o.partition for o in listed}) > 1


def test_a_client_past_a_partitions_end_reads_it_from_its_start(pipeline: Pipeline) -> None:
    # As when a client goes on from where it read a log that is no more (the embedded broker came
    # back empty, memory only). Apache Kafka's consumer reads such a partition from its start
    # (`earliest`); before, on the embedded Tansu, a listing waited for an end it was never told
    # and raised ObservationsUnread, and a following listing or a `wait` read nothing, ever.
    sent = pipeline.propose("invoice.fetch", {"invoice_id": "inv_acme0001"}, run_id=f"run_{uuid.uuid4().hex[:10]}")
    answer = pipeline.client.wait(sent)
    past = [(answer.partition, 1_000_000_000)]
    client = pipeline.client
    calls = [sent.call_id]
    listing = client.observations(tenant_id="acme", call_ids=calls, idle_timeout=0, start_offsets=past)
    assert [(o.partition, o.offset) for o in listing if o.is_final] == [(answer.partition, answer.offset)]
    following = client.observations(tenant_id="acme", call_ids=calls, follow=True, timeout=30, start_offsets=past)
    first = next(following, None)
    following.close()
    assert first is not None and (first.partition, first.offset) == (answer.partition, answer.offset)
    # `wait` for a call its feed no longer holds (it forgot the call once its final answer was
    # taken) reads the topic itself, from where the call was proposed.
    assert not client._feed("acme").watches(sent.call_id)
    again = client.wait(dataclasses.replace(sent, start_offsets=tuple(past)), timeout=30, resend=False)
    assert (again.partition, again.offset) == (answer.partition, answer.offset)
