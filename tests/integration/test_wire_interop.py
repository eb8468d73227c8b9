"""The topics and the wire format are usable from outside toolgate.

A producer written with kafka-python (pure Python, no librdkafka) and the Apache `avro`
package (a second Avro implementation) publishes a proposal using only the .avsc files;
it reads the observation back and decodes it from the fingerprint in its header.
"""

from __future__ import annotations

import io
import json
import time
import uuid
from pathlib import Path
from typing import Any

import avro.io
import avro.schema
from fastavro.schema import expand_schema, load_schema
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from toolgate.topics.catalog import Topics

from ..conftest import Pipeline

AVRO_DIR = Path(__file__).resolve().parents[2] / "schemas" / "avro"


def apache_schema(name: str) -> avro.schema.Schema:
    expanded = expand_schema(load_schema(str(AVRO_DIR / f"toolgate.{name}.avsc")))
    return avro.schema.parse(json.dumps(_public(expanded)))


def _public(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _public(v) for k, v in value.items() if not k.startswith("__")}
    if isinstance(value, list):
        return [_public(v) for v in value]
    return value


def test_a_foreign_client_proposes_and_reads_its_observation(pipeline: Pipeline) -> None:
    proposal_schema, observation_schema = apache_schema("ToolProposal"), apache_schema("Observation")
    call_id, run_id = f"call_{uuid.uuid4().hex}", f"run_{uuid.uuid4().hex[:10]}"
    record = {
        "call_id": call_id,
        "tenant_id": "acme",
        "principal": {"user_id": "foreign", "agent_id": "kafka-python", "scopes": ["invoices:read"]},
        "workflow_id": run_id,
        "run_id": run_id,
        "logical_operation_id": "op-1",
        "tool_name": "invoice.fetch",
        "tool_version": "1.x",
        "arguments": '{"invoice_id": "inv_acme0002"}',
        "idempotency_key": None,
        "deadline_ms": None,
        "repair_attempt": 0,
        "dry_run": False,
        "created_at_ms": int(time.time() * 1000),
    }
    body = io.BytesIO()
    avro.io.DatumWriter(proposal_schema).write(record, avro.io.BinaryEncoder(body))
    value = b"\xc3\x01" + proposal_schema.fingerprint("CRC-64-AVRO") + body.getvalue()
    topics = Topics()
    bootstrap = pipeline.runtime["kafka_bootstrap"]
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=1000)
    partitions = [TopicPartition(topics.observations, p) for p in consumer.partitions_for_topic(topics.observations)]
    consumer.assign(partitions)
    consumer.seek_to_end()
    ends = {tp: consumer.position(tp) for tp in partitions}
    for tp, offset in ends.items():
        consumer.seek(tp, offset)
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    producer.send(topics.proposals, key=run_id.encode(), value=value, headers=[("call_id", call_id.encode())]).get(30)
    producer.close()
    decoded = None
    deadline = time.monotonic() + 45
    while decoded is None and time.monotonic() < deadline:
        for message in consumer:
            if dict(message.headers).get("call_id") == call_id.encode():
                assert message.key == run_id.encode()
                assert message.value[:2] == b"\xc3\x01"
                assert message.value[2:10] == observation_schema.fingerprint("CRC-64-AVRO")
                reader = avro.io.DatumReader(observation_schema)
                decoded = reader.read(avro.io.BinaryDecoder(io.BytesIO(message.value[10:])))
                break
    consumer.close()
    assert decoded is not None, "no observation arrived"
    assert decoded["status"]["taxonomy_class"] == "SUCCESS"
    assert decoded["tool_identity"] == {"name": "invoice.fetch", "version": "1.0.0", "call_id": call_id}
    assert json.loads(decoded["result_payload"]["data"])["invoice_id"] == "inv_acme0002"
