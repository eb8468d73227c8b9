"""The archive of Kafka's classes (ops/stack/kafka_classes.py) is named by all it depends on, and a node
either writes it or maps it."""

from __future__ import annotations

import os
from pathlib import Path

from toolgate.ops.stack.kafka_classes import archive_name
from toolgate.ops.stack.kafka_dist import KAFKA_VERSION, Distribution


def distribution_in(path: Path, *jars: tuple[str, bytes]) -> Distribution:
    (path / "libs").mkdir(parents=True, exist_ok=True)
    for name, content in jars:
        (path / "libs" / name).write_bytes(content)
    return Distribution(path / "libs", KAFKA_VERSION, "cache")


def test_the_name_changes_with_the_jars_and_the_java_and_only_then(tmp_path: Path) -> None:
    java = tmp_path / "bin" / "java"
    java.parent.mkdir()
    java.write_bytes(b"a java")
    jars = distribution_in(tmp_path / "a", ("kafka_2.13.jar", b"PK1"), ("kafka-clients.jar", b"PK2"))
    same = distribution_in(tmp_path / "b", ("kafka-clients.jar", b"PK2"), ("kafka_2.13.jar", b"PK1"))
    name = archive_name(jars, str(java))
    assert name.startswith(f"kafka-{KAFKA_VERSION}-") and name.endswith(".jsa")
    assert archive_name(same, str(java)) == name  # the same jars elsewhere: the same classes
    (tmp_path / "b" / "libs" / "kafka-clients.jar").write_bytes(b"PK2, another build")
    assert archive_name(same, str(java)) != name
    os.utime(java, ns=(0, 0))  # another Java installed on the same path
    assert archive_name(jars, str(java)) != name


def test_a_node_writes_the_archive_or_maps_it(tmp_path: Path) -> None:
    plain = Distribution(tmp_path, KAFKA_VERSION, "cache")
    assert plain.node_options() == plain.sharing() == []
    shared = Distribution(tmp_path, KAFKA_VERSION, "cache", classes=tmp_path / "k.jsa")
    assert shared.node_options() == shared.sharing() == [f"-XX:SharedArchiveFile={tmp_path / 'k.jsa'}"]
    writing = Distribution(tmp_path, KAFKA_VERSION, "cache", dump_classes_to=tmp_path / "new.jsa")
    assert writing.node_options() == [f"-XX:ArchiveClassesAtExit={tmp_path / 'new.jsa'}"]
    assert writing.sharing() == []  # the formatter, in the same run, neither writes nor maps it
