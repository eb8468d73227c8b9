"""Which of a round's sealed records are observations, as toolgate.observations keeps them.

Pure: the records as they will be produced (sealed: the deployment's signature, its Merkle path
and key id are among their headers) come in; a row for each record on a tenant's observations
topic comes out (store/observations.py). Its tenant is the topic's, its call the `call_id`
header's. The stage's delivery stores them before it produces them (workers/runtime/delivery.py
says why).
"""

from __future__ import annotations

import base64
from collections.abc import Sequence

import orjson

from toolgate.store.observations import Published
from toolgate.topics.catalog import Topics
from toolgate.topics.headers import CALL_ID, Headers, header
from toolgate.topics.producers import Record

OBSERVATIONS = "observations"


def headers_json(headers: Headers) -> str:
    """`[[name, base64 of the value], ...]`, in the headers' order (a produced record's header
    always has a value: the format's null is for none)."""
    pairs = [[name, base64.b64encode(value).decode()] for name, value in headers]
    return orjson.dumps(pairs).decode()


def published(records: Sequence[Record], topics: Topics) -> list[Published]:
    """The observations among `records` (physical topics), as rows to keep."""
    rows = []
    for record in records:
        kind, tenant = topics.parse(record.topic)
        if kind != OBSERVATIONS or tenant is None:
            continue
        call_id = header(record.headers, CALL_ID) or ""
        rows.append(Published(tenant, call_id, record.topic, record.key, record.value, headers_json(record.headers)))
    return rows
