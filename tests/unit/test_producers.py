"""Which records go compressed: those of the topics only toolgate reads, never those others read."""

from __future__ import annotations

import pytest

from toolgate.topics.catalog import CATALOG, Shape, Topics
from toolgate.topics.producers import Producers

# What agents, approval services and operators' tools read: plain, whatever the deployment's codec.
READ_BY_OTHERS = {"observations", "approvals_requested", "deadletter"}


def _names(topics: Topics) -> dict[str, str]:
    return {spec.logical: topics.name(spec.logical, "acme" if spec.per_tenant else None) for spec in CATALOG}


def test_only_the_topics_toolgate_alone_reads_are_compressed() -> None:
    topics = Topics("dep-")
    for logical, name in _names(topics).items():
        assert topics.compressed(name) is (logical not in READ_BY_OTHERS), logical
    assert all(spec.compressed for spec in CATALOG if spec.shape is Shape.INTERNAL)


@pytest.mark.parametrize("name", ["tool.validated", "other-tool.validated", "tool.validated.acme", "payments", ""])
def test_a_topic_outside_the_deployment_is_plain(name: str) -> None:
    assert not Topics("dep-").compressed(name)


def test_one_producer_per_codec_made_when_first_needed() -> None:
    topics = Topics("dep-")
    names = _names(topics)
    producers = Producers({"bootstrap.servers": "127.0.0.1:9"}, topics, "lz4")
    assert producers.made() == []
    assert producers.codec(names["validated"]) == "lz4"
    assert producers.codec(names["observations"]) == "none"
    internal = producers.for_topic(names["validated"])
    assert producers.for_topic(names["results"]) is internal
    assert producers.for_topic(names["proposals"]) is internal
    assert len(producers.made()) == 1
    edge = producers.for_topic(names["observations"])
    assert edge is not internal and producers.for_topic(names["deadletter"]) is edge
    assert len(producers.made()) == 2


def test_without_compression_every_topic_is_plain() -> None:
    topics = Topics()
    producers = Producers({"bootstrap.servers": "127.0.0.1:9"}, topics, "none")
    assert {producers.codec(name) for name in _names(topics).values()} == {"none"}


def test_an_unknown_codec_is_refused_before_anything_is_sent() -> None:
    with pytest.raises(ValueError, match="brotli"):
        Producers({"bootstrap.servers": "127.0.0.1:9"}, Topics(), "brotli")
