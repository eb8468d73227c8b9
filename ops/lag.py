"""Each stage's consumer lag, as `toolgate status` and the sampled gauges read it: the records
on the topics a stage reads (ops/acls.py `STAGE_RIGHTS`) past the offsets its consumer group
committed. A partition's end is read, not taken from its high watermark (ops/status.py says
why); cut short after `LAG_READ_S`, a count is a lower bound, and says so."""

from __future__ import annotations

import uuid

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from toolgate.kafka_security import ADMIN, client_config
from toolgate.ops.acls import STAGE_RIGHTS, STATUS_GROUP_PREFIX
from toolgate.ops.snapshot import Lag
from toolgate.settings import Settings
from toolgate.topics.catalog import Topics, stage_group
from toolgate.topics.ends import READER_SETTINGS, ToEnd
from toolgate.workers.stages import STAGES

KAFKA_TIMEOUT_S = 10.0
EARLIEST: OffsetSpec = OffsetSpec.earliest()  # type: ignore[no-untyped-call]
LATEST: OffsetSpec = OffsetSpec.latest()  # type: ignore[no-untyped-call]
LAG_READ_S = 5.0  # reading partitions to their ends stops here; a longer count is a lower bound


def partition_lag(committed: int, low: int, end: int) -> int:
    """Records a group has yet to consume on one partition. A group that never committed
    reads from the earliest record (the stages' `auto_offset_reset`); a committed offset
    below the earliest points at records retention already deleted."""
    position = max(committed, low) if committed >= 0 else low
    return max(0, end - position)


def lags(settings: Settings, admin: AdminClient | None = None, reader: Consumer | None = None) -> tuple[Lag, ...]:
    """Every stage's consumer lag (None for the stages that read Postgres); `admin` and `reader`
    (`end_reader`) are clients kept between readings (the gauges'), else made for this one."""
    admin = admin or AdminClient(admin_config(settings))
    metadata = admin.list_topics(timeout=KAFKA_TIMEOUT_S).topics
    topics = Topics(settings.topic_prefix)
    plans: dict[str, tuple[str, list[TopicPartition]]] = {}
    for stage in STAGES:
        reads = STAGE_RIGHTS[stage].reads if STAGE_RIGHTS[stage].consumes_with_group else ()
        names = sorted(name for name in metadata if topics.parse(name)[0] in reads)
        missing = [logical for logical in reads if not any(topics.parse(n)[0] == logical for n in names)]
        if missing:
            raise LookupError(f"{stage} reads {', '.join(missing)}, which the broker does not have")
        if names:
            partitions = [TopicPartition(n, p) for n in names for p in sorted(metadata[n].partitions)]
            plans[stage] = (stage_group(settings.topic_prefix, stage), partitions)
    every = [tp for _, tps in plans.values() for tp in tps]
    low, high = _offsets(admin, every, EARLIEST), _offsets(admin, every, LATEST)
    committed: dict[tuple[str, int], int] = {}
    for group, tps in plans.values():
        request = [ConsumerGroupTopicPartitions(group, tps)]
        answer = admin.list_consumer_group_offsets(request, request_timeout=KAFKA_TIMEOUT_S)[group].result()
        committed.update({(tp.topic, tp.partition): tp.offset for tp in answer.topic_partitions})
    # Read from where the group stands, or from the last record the broker admits to, if later.
    starts = {key: max(committed.get(key, -1), low[key], high[key] - 1) for key in low}
    ends, exact = _read_ends(settings, starts, reader)
    out = []
    for stage in STAGES:
        if stage not in plans:
            out.append(Lag(stage, None))
            continue
        group, tps = plans[stage]
        keys = [(tp.topic, tp.partition) for tp in tps]
        out.append(
            Lag(
                stage,
                group,
                tuple(sorted({tp.topic for tp in tps})),
                sum(partition_lag(committed.get(k, -1), low[k], ends[k]) for k in keys),
                all(exact[k] for k in keys),
                len(keys),
                sum(1 for k in keys if committed.get(k, -1) >= 0),
            )
        )
    return tuple(out)


def _offsets(admin: AdminClient, partitions: list[TopicPartition], spec: OffsetSpec) -> dict[tuple[str, int], int]:
    if not partitions:
        return {}
    futures = admin.list_offsets({tp: spec for tp in partitions}, request_timeout=KAFKA_TIMEOUT_S)
    return {(tp.topic, tp.partition): future.result().offset for tp, future in futures.items()}


def admin_config(settings: Settings) -> dict[str, str | int | float | bool]:
    return {**client_config(settings, ADMIN), "bootstrap.servers": settings.kafka_bootstrap}


def end_reader(settings: Settings) -> Consumer:
    """A consumer that reads partitions to their ends for `lags` (it never joins a group, and
    commits nothing)."""
    return Consumer(
        {
            **admin_config(settings),
            **READER_SETTINGS,
            "group.id": f"{STATUS_GROUP_PREFIX}{uuid.uuid4().hex[:8]}",
        }
    )


def _read_ends(
    settings: Settings, starts: dict[tuple[str, int], int], reader: Consumer | None = None
) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], bool]]:
    """Each partition's end offset, read from `start` until the broker tells its end
    (topics/ends.py), or `LAG_READ_S` passes: then the offset reached so far, not exact. Nothing
    is committed; a kept `reader` is left with nothing assigned."""
    if not starts:
        return {}, {}
    consumer = reader or end_reader(settings)
    reading = ToEnd(consumer, starts, LAG_READ_S)
    try:
        for _ in reading:
            pass
    finally:
        if reader is None:
            consumer.close()
    return {k: reading.reached.get(k, start) for k, start in starts.items()}, {k: k in reading.told for k in starts}
