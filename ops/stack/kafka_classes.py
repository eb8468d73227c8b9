"""A class-data-sharing archive of Apache Kafka's classes: a node's JVM starts on far less CPU.

Most of a Kafka node's start is its JVM loading, parsing and verifying several thousand classes
from the jars. Java (13 on) can write the classes one run loaded into an archive as it exits
(`-XX:ArchiveClassesAtExit`), which later JVMs map instead (`-XX:SharedArchiveFile`). With the
archive a node was started sooner, on far less CPU, and the storage formatter ran sooner too
(docs/performance.md, "Figures behind the code"). Three nodes start side by side, so on two
cores their start is bound by that CPU.

The archive is made once for a distribution and a Java: a one-node cluster started in a scratch
directory and stopped (its JVM writes the archive as it exits), under a lock, into a temporary
name renamed into place. It is kept beside the jars' cache, named by what it depends on: the
java binary and the jars (names and sizes). A JVM that cannot use an archive (another build of
Java, other jars) says so in its log and starts without it (Java's default, -Xshare:auto), so a
wrong archive costs only time; and if one cannot be made, nodes start without one.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from toolgate.ops.kafka_credentials import ADMIN_USER, broker_security, client_settings
from toolgate.ops.stack.kafka_broker import start_cluster
from toolgate.ops.stack.kafka_dist import Distribution, default_cache, once
from toolgate.ops.stack.kafka_storage import java
from toolgate.ops.stack.kafka_tls import ensure_certificates
from toolgate.ops.stack.processes import free_port


def archive_directory(cache: Path | None) -> Path:
    """Where archives are kept: beside the jars' cache (`TOOLGATE_KAFKA_CACHE`, or the default)."""
    return (cache or default_cache()).parent / "classes"


def archive_name(distribution: Distribution, java_binary: str) -> str:
    """The archive's file name, a digest of what it depends on: the Java that wrote it, the jars."""
    real = Path(java_binary).resolve()
    stat = real.stat()
    jars = sorted((jar.name, jar.stat().st_size) for jar in distribution.libs.glob("*.jar"))
    identity = {"java": [str(real), stat.st_size, stat.st_mtime_ns], "jars": jars, "version": distribution.version}
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]
    return f"kafka-{distribution.version}-{digest}.jsa"


def with_classes(
    distribution: Distribution, cache: Path | None = None, say: Callable[[str], None] = print
) -> Distribution:
    """`distribution`, its nodes sharing an archive of its classes (made now, once, if missing);
    as it was if none can be made."""
    directory = archive_directory(cache)
    archive = directory / archive_name(distribution, java())

    def make() -> None:
        say(f"kafka      archiving the classes a node loads into {archive} (once: nodes then start faster)")
        _make(distribution, archive, say)

    once(directory / f"{archive.name}.lock", archive.is_file, make)
    return replace(distribution, classes=archive) if archive.is_file() else distribution


def _make(distribution: Distribution, archive: Path, say: Callable[[str], None]) -> None:
    """Start and stop a one-node cluster in a scratch directory, its JVM writing the archive.
    Secured (SASL_SSL on every listener, a client authenticated): the classes of TLS and SCRAM
    are loaded too, and the archive serves secured and plain clusters alike."""
    scratch = Path(tempfile.mkdtemp(prefix=".archiving-", dir=archive.parent))
    written = scratch / archive.name
    try:
        training = replace(distribution, classes=None, dump_classes_to=written)
        security = broker_security(ensure_certificates(scratch / "tls"), scratch / "secrets")
        admin = client_settings(ADMIN_USER, security.certificates, scratch / "secrets")
        cluster = start_cluster(scratch, 1, lambda _name: free_port(), training, security=security, client=admin)
        cluster.stop()  # the JVM writes the archive as it exits
        if written.is_file() and written.stat().st_size > 0:
            os.replace(written, archive)
        else:
            say("kafka      no class archive was written; nodes start without one")
    except (SystemExit, OSError, RuntimeError) as exc:
        say(f"kafka      could not archive the classes ({exc}); nodes start without one")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
