"""Which sealed records toolgate.observations keeps (workers/runtime/published.py): each record of
a tenant's observations topic, its tenant from the topic, its call from the call_id header, its
headers in order as base64; nothing of any other topic."""

from __future__ import annotations

import base64
import json

from toolgate.topics.catalog import Topics
from toolgate.topics.producers import Record
from toolgate.workers.runtime.published import published

TOPICS = Topics("t1.")


def test_only_observations_are_kept_with_their_tenant_call_and_headers_in_order() -> None:
    headers = [("call_id", b"call_1"), ("toolgate-signature", b"\x00\xffsig"), ("toolgate-proof", b"")]
    records = [
        Record(TOPICS.name("observations", "acme"), b"run_1", b"value", headers),
        Record(TOPICS.name("results"), None, b"batch", [("toolgate-mac", b"m")], 0),
        Record(TOPICS.name("approvals_requested", "acme"), b"k", b"packet", headers),
        Record(TOPICS.name("deadletter"), b"call_2", b"letter", [("call_id", b"call_2")]),
        Record("elsewhere.tool.observations.acme", None, b"foreign", headers),
    ]
    [row] = published(records, TOPICS)
    assert (row.tenant_id, row.call_id, row.topic, row.key, row.value) == (
        "acme",
        "call_1",
        "t1.tool.observations.acme",
        b"run_1",
        b"value",
    )
    assert [[n, base64.b64decode(v)] for n, v in json.loads(row.headers)] == [[n, v] for n, v in headers]


def test_an_observation_without_a_call_id_is_kept_under_none() -> None:
    [row] = published([Record(TOPICS.name("observations", "globex"), None, b"v", [])], TOPICS)
    assert (row.tenant_id, row.call_id, row.key, json.loads(row.headers)) == ("globex", "", None, [])
