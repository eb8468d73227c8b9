"""Apache Kafka's jars for `toolgate up --broker kafka`: an installed distribution, or Maven Central.

`KAFKA_HOME` names an installed distribution: its `libs/` holds the jars, as Apache's tarball
lays them out. Without it, the jars of Kafka `KAFKA_VERSION` are resolved from Maven Central
once, by Maven (`mvn dependency:copy-dependencies` over the pom below), into a cache directory:
`$XDG_CACHE_HOME/toolgate/kafka/<version>` (`~/.cache/...`), or `TOOLGATE_KAFKA_CACHE` (what
that takes: docs/performance.md, "Figures behind the code").

A half-finished resolution is never taken for a finished one: it is made in a scratch directory
beside the cache, a marker naming every jar is written last, and only then is the directory
renamed into place (a rename is atomic); a cache whose marker is missing, or names a jar that is
not there, is made again. A lock beside the cache keeps two `toolgate up` (two test sessions)
from resolving at the same time: the second waits and finds the first's.

The pom asks for the broker (`kafka_2.13`), the tools (`kafka-tools`: the storage formatter and
the admin commands) and one SLF4J binding, to log4j2: the broker's pom brings slf4j-api 1.7.36
and log4j2 (which Kafka 4 manages its log levels with) but no binding, and with the 1.7 binding
to log4j2 (`log4j-slf4j-impl`) one logging system, configured by the file ops/stack/kafka_broker.py
writes, takes every line. (`slf4j-reload4j` also runs the broker, but then log4j2, configured
by nothing, complains at every start.)
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

KAFKA_VERSION = "4.4.0"
SCALA_VERSION = "2.13"
LOG4J_VERSION = "2.25.5"  # the log4j2 that kafka_2.13 4.4.0 depends on
MARKER = "toolgate-kafka.json"
MAVEN_TIMEOUT_S = 900.0

POM = f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>toolgate</groupId>
  <artifactId>kafka-runtime</artifactId>
  <version>{KAFKA_VERSION}</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_{SCALA_VERSION}</artifactId>
      <version>{KAFKA_VERSION}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka-tools</artifactId>
      <version>{KAFKA_VERSION}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j-impl</artifactId>
      <version>{LOG4J_VERSION}</version>
    </dependency>
  </dependencies>
</project>
"""


@dataclass(frozen=True)
class Distribution:
    """Where a Kafka's jars are, which version they are, and where they came from."""

    libs: Path
    version: str
    source: str  # "KAFKA_HOME", "cache" or "Maven Central"
    classes: Path | None = None  # an archive of its classes every JVM maps (ops/stack/kafka_classes.py)
    dump_classes_to: Path | None = None  # where a node's JVM writes that archive as it exits

    @property
    def classpath(self) -> str:
        return str(self.libs / "*")

    def sharing(self) -> list[str]:
        """The JVM options that map the class archive, if there is one."""
        return [f"-XX:SharedArchiveFile={self.classes}"] if self.classes is not None else []

    def node_options(self) -> list[str]:
        """A node's JVM options for the class archive: write it at exit, or map it."""
        if self.dump_classes_to is not None:
            return [f"-XX:ArchiveClassesAtExit={self.dump_classes_to}"]
        return self.sharing()


def default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "toolgate" / "kafka" / KAFKA_VERSION


def installed(kafka_home: Path) -> Distribution:
    """The distribution in `kafka_home` (Apache's layout: `libs/kafka_<scala>-<version>.jar`)."""
    jars = sorted((kafka_home / "libs").glob("kafka_*-*.jar"))
    broker = [j for j in jars if not j.name.endswith(("-sources.jar", "-javadoc.jar", "-test.jar"))]
    if not broker:
        raise SystemExit(f"toolgate: KAFKA_HOME={kafka_home} has no libs/kafka_<scala>-<version>.jar")
    version = broker[0].stem.split("-", 1)[1]
    return Distribution(kafka_home / "libs", version, "KAFKA_HOME")


def finished(cache: Path) -> bool:
    """Whether `cache` holds a finished resolution: its marker, and every jar the marker names."""
    try:
        marker = json.loads((cache / MARKER).read_text())
    except (OSError, ValueError):
        return False
    jars = marker.get("jars") if isinstance(marker, dict) else None
    return (
        isinstance(jars, list)
        and bool(jars)
        and marker.get("version") == KAFKA_VERSION
        and all((cache / "libs" / str(jar)).is_file() for jar in jars)
    )


def find_maven() -> str | None:
    """The `mvn` on PATH, if any."""
    return shutil.which("mvn")


def resolve(
    cache: Path | None = None,
    kafka_home: Path | None = None,
    say: Callable[[str], None] = print,
    maven: Callable[[], str | None] = find_maven,
) -> Distribution:
    """Kafka's jars: `kafka_home`'s if given, else the cache's, resolved from Maven Central first
    if the cache is not finished."""
    if kafka_home is not None:
        return installed(kafka_home)
    cache = cache or default_cache()

    def download() -> None:
        say(f"kafka      resolving Apache Kafka {KAFKA_VERSION} from Maven Central into {cache} (once)")
        _download(cache, maven())

    fetched = once(cache.parent / f"{cache.name}.lock", lambda: finished(cache), download)
    return Distribution(cache / "libs", KAFKA_VERSION, "Maven Central" if fetched else "cache")


def once(lock: Path, done: Callable[[], bool], make: Callable[[], None]) -> bool:
    """`make()` unless `done()`, under an exclusive lock on the file `lock`: a second process
    making the same thing waits for the first, then finds it done. Whether this call made it."""
    if done():
        return False
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        if done():
            return False
        make()
        return True


def _download(cache: Path, maven: str | None) -> None:
    """Resolve the jars into a scratch directory beside `cache`, then rename it into place."""
    if maven is None:
        raise SystemExit(
            "toolgate: --broker kafka needs Maven (`mvn`) to fetch Apache Kafka once, "
            "or KAFKA_HOME naming an installed distribution"
        )
    scratch = Path(tempfile.mkdtemp(prefix=f".{cache.name}.partial-", dir=cache.parent))
    try:
        (scratch / "pom.xml").write_text(POM)
        done = subprocess.run(
            [
                maven,
                "-q",
                "-B",
                "-f",
                str(scratch / "pom.xml"),
                "dependency:copy-dependencies",
                f"-DoutputDirectory={scratch / 'libs'}",
                "-DincludeScope=runtime",
            ],
            capture_output=True,
            text=True,
            timeout=MAVEN_TIMEOUT_S,
            check=False,
        )
        jars = sorted(p.name for p in (scratch / "libs").glob("*.jar"))
        if done.returncode != 0 or f"kafka_{SCALA_VERSION}-{KAFKA_VERSION}.jar" not in jars:
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-20:])
            raise SystemExit(f"toolgate: Maven could not resolve Apache Kafka {KAFKA_VERSION}:\n{tail}")
        (scratch / MARKER).write_text(json.dumps({"version": KAFKA_VERSION, "jars": jars}))
        if cache.exists():  # an unfinished or damaged cache: replaced whole
            shutil.rmtree(cache)
        scratch.rename(cache)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
