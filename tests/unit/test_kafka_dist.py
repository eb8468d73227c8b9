"""Where `toolgate up --broker kafka` finds Kafka's jars (ops/stack/kafka_dist.py): a half-finished
resolution is never taken for a finished one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolgate.ops.stack.kafka_dist import KAFKA_VERSION, MARKER, finished, installed, resolve

JARS = [f"kafka_2.13-{KAFKA_VERSION}.jar", f"kafka-clients-{KAFKA_VERSION}.jar"]


def cache_with(path: Path, jars: list[str], marker: dict[str, object] | None) -> Path:
    (path / "libs").mkdir(parents=True)
    for jar in jars:
        (path / "libs" / jar).write_bytes(b"PK")
    if marker is not None:
        (path / MARKER).write_text(json.dumps(marker))
    return path


def test_a_cache_with_its_marker_and_every_jar_is_finished(tmp_path: Path) -> None:
    cache = cache_with(tmp_path / KAFKA_VERSION, JARS, {"version": KAFKA_VERSION, "jars": JARS})
    assert finished(cache)


@pytest.mark.parametrize(
    ("jars", "marker"),
    [
        (JARS, None),  # the jars copied, the marker not yet written: interrupted
        (JARS[:1], {"version": KAFKA_VERSION, "jars": JARS}),  # a jar gone
        (JARS, {"version": "3.9.0", "jars": JARS}),  # another version's
        (JARS, {"version": KAFKA_VERSION, "jars": []}),
    ],
    ids=["no marker", "a jar missing", "another version", "no jars"],
)
def test_an_unfinished_cache_is_not_used(tmp_path: Path, jars: list[str], marker: dict[str, object] | None) -> None:
    assert not finished(cache_with(tmp_path / KAFKA_VERSION, jars, marker))


def test_a_finished_cache_is_used_without_maven(tmp_path: Path) -> None:
    cache = cache_with(tmp_path / KAFKA_VERSION, JARS, {"version": KAFKA_VERSION, "jars": JARS})
    found = resolve(cache, maven=lambda: None)  # no Maven: it must not be needed
    assert (found.libs, found.version, found.source) == (cache / "libs", KAFKA_VERSION, "cache")
    assert found.classpath == f"{cache / 'libs'}/*"


def test_an_unfinished_cache_is_resolved_again(tmp_path: Path) -> None:
    cache = cache_with(tmp_path / KAFKA_VERSION, JARS, None)
    with pytest.raises(SystemExit, match="needs Maven"):  # it went to resolve, and found no Maven
        resolve(cache, say=lambda _: None, maven=lambda: None)


def test_an_installed_distribution_says_its_version(tmp_path: Path) -> None:
    (tmp_path / "libs").mkdir()
    for jar in ("kafka_2.13-4.4.0.jar", "kafka_2.13-4.4.0-sources.jar", "kafka-clients-4.4.0.jar"):
        (tmp_path / "libs" / jar).write_bytes(b"PK")
    found = installed(tmp_path)
    assert (found.version, found.source, found.libs) == ("4.4.0", "KAFKA_HOME", tmp_path / "libs")


def test_a_directory_without_the_broker_is_not_a_distribution(tmp_path: Path) -> None:
    (tmp_path / "libs").mkdir()
    with pytest.raises(SystemExit, match="KAFKA_HOME"):
        installed(tmp_path)
