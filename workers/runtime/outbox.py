"""Outbox rows: records to publish, in the same transaction as the state they describe.

Any Kafka write that follows from a Postgres state change (an execution's result, an
approval's release, an expiry) is built here, as an item of a stage batch (`item`) or an edge
record (`record`), and written by store/outbox.py in the transaction of that change, so the state
and the record that announces it commit or roll back together; the outbox relay publishes them.

A writer on a call's critical path may publish its rows itself, once they are committed, rather
than wait for the relay to be woken: it inserts them held (store/outbox.py `enqueue_held`), which
the relay leaves alone for `HOLD_S`, produces them (`Held`), and marks them sent
(`mark_published`) once the broker acknowledged them. A writer that dies in between leaves them to
the relay when the hold ends, so a held row is published at least once, as every row is.
"""

from __future__ import annotations

from dataclasses import dataclass

from toolgate.schemas.codec import codec
from toolgate.schemas.models import ExecutionResult, StageRecord
from toolgate.schemas.wire import WireModel
from toolgate.store.outbox import OutboxRow, RowKind
from toolgate.topics.headers import Address
from toolgate.workers.runtime import results
from toolgate.workers.runtime.emit import Emit


def item(topic: str, partition: int, model: StageRecord | ExecutionResult) -> OutboxRow:
    data = results.encoded(model) if isinstance(model, ExecutionResult) else codec().encode(model)
    return OutboxRow(topic, partition, RowKind.ITEM, None, data)


def record(topic: str, model: WireModel, address: Address, tenant_topic: bool = False) -> OutboxRow:
    """An edge record; with `tenant_topic`, to the topic of its address's tenant itself."""
    c = codec()
    headers = tuple((k, v.decode()) for k, v in address.headers(c.fingerprint_of(type(model))))
    tenant = address.tenant_id if tenant_topic else None
    return OutboxRow(topic, None, RowKind.RECORD, address.key.encode(), c.encode(model), headers, tenant)


@dataclass(frozen=True)
class Held:
    """Item rows inserted held, for their writer to publish once its transaction committed."""

    ids: list[int]
    rows: list[OutboxRow]

    def publish(self, out: Emit) -> None:
        """Hand the rows to the round's output; the round marks them sent once acknowledged."""
        for row in self.rows:
            if row.kind is not RowKind.ITEM or row.partition is None:
                raise ValueError(f"only item rows are held, not a {row.kind} row for {row.topic}")
            out.raw_item(row.topic, row.partition, row.payload)
        out.outbox_ids.extend(self.ids)
