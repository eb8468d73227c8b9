"""The embedded Postgres's passwords: one per role, made once, kept in libpq password files.

`toolgate up`'s Postgres requires a scram-sha-256 password of every role, the superuser
`postgres` (the tables' owner) included, on its Unix socket and over TCP (ops/stack/embedded.py):
otherwise any local process logs in as the superuser, and the worker role, which may only
append to the audit log (ops/roles.py), protects nothing. Each role's password is generated at
first start into a libpq password file of its own in the secrets directory,
`<secrets>/pgpass-<role>` (0600, the directory 0700), and connection strings name that file
(`passfile=`), so no password is in a URL, an environment variable, `runtime.json` or a log:
workers are given the worker role's file only, operators' commands the owner's (through
runtime.json's URL). The server is only ever sent a role's SCRAM verifier (`scram_verifier`,
computed here), never the password, so not even a statement log of the server holds it. A
password read here is registered with the log scrubber all the same.

A data directory is made with every rule asking for a password (`HBA`, initdb given only the
superuser's verifier, `verifier_file`). One made before, whose `pg_hba.conf` trusted every local
connection, is moved to passwords when it starts (`require_passwords`): the superuser gets its
password over the last trusted connection, then the rules are replaced and reloaded, and the
start fails unless a login without a password is refused afterwards.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg

from toolgate.scrubber import SCRUBBER
from toolgate.store import server

SCRAM_ITERATIONS = 4096  # Postgres's default (scram_iterations)
SUPERUSER = "postgres"
# Every role logs in with its password, on the socket and over TCP (what initdb writes for
# --auth=scram-sha-256, less replication, which nothing here uses).
HBA = """# toolgate: every role, the superuser included, logs in with its password (ops/pgpass.py)
local   all   all                  scram-sha-256
host    all   all   127.0.0.1/32   scram-sha-256
host    all   all   ::1/128        scram-sha-256
"""


def passfile(secrets_dir: Path, role: str) -> Path:
    """`role`'s password file in the secrets directory, made with a new password if missing."""
    secrets_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    secrets_dir.chmod(0o700)
    path = secrets_dir / f"pgpass-{role}"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path
    with os.fdopen(fd, "w") as f:
        # Any host, port and database, this role: a URL naming the file chooses the role.
        f.write(f"*:*:*:{role}:{secrets.token_urlsafe(32)}\n")
    return path


def password(path: Path) -> str:
    """The password in a password file `passfile` made (registered with the log scrubber)."""
    value = path.read_text().strip().rsplit(":", 1)[1]
    SCRUBBER.register(value)
    return value


def scram_verifier(secret: str, salt: bytes | None = None, iterations: int = SCRAM_ITERATIONS) -> str:
    """The SCRAM-SHA-256 verifier Postgres stores for a password (RFC 5802/7677, as libpq's
    PQencryptPasswordConn makes it): given in ALTER ROLE ... PASSWORD, or to initdb, it is kept
    as it is, and the password never leaves this process. Passwords made here are ASCII, which
    SASLprep leaves as they are."""
    salt = salt if salt is not None else os.urandom(16)
    salted = hashlib.pbkdf2_hmac("sha256", secret.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    server_key = hmac.new(salted, b"Server Key", hashlib.sha256).digest()

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    return f"SCRAM-SHA-256${iterations}:{b64(salt)}${b64(hashlib.sha256(client_key).digest())}:{b64(server_key)}"


def set_password(conn: psycopg.Connection[Any], role: str, path: Path, login: bool = False) -> None:
    """Give `role` the password in its file `path` (as its verifier); and the right to log in."""
    server.set_verifier(conn, role, scram_verifier(password(path)), login)


def with_passfile(url: str, path: Path) -> str:
    """`url` with libpq's `passfile` parameter naming `path` (replacing one it had)."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "passfile"] + [("passfile", str(path))]
    return urlunsplit(parts._replace(query=urlencode(query, safe="")))


@contextmanager
def verifier_file(directory: Path, run_as: str | None, path: Path) -> Iterator[Path]:
    """A file in `directory` holding the SCRAM verifier of the password in `path` (never the
    password), readable by the server's user `run_as` only, for as long as initdb needs it."""
    fd, name = tempfile.mkstemp(prefix=".initdb-", dir=directory)
    made = Path(name)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(scram_verifier(password(path)) + "\n")
        if run_as:
            shutil.chown(made, run_as, run_as)
        yield made
    finally:
        made.unlink(missing_ok=True)


def requires_passwords(hba: str) -> bool:
    """Whether every rule of a pg_hba.conf asks for a password (scram-sha-256): no `trust`,
    `peer` or `md5` rule lets anyone in without one."""
    rules = [line.split("#", 1)[0].split() for line in hba.splitlines()]
    return all("scram-sha-256" in rule for rule in rules if rule)


def require_passwords(datadir: Path, superuser_url: str, port: int, log_path: Path, timeout: float = 15.0) -> bool:
    """Move a running server whose rules trust local connections to passwords (the module
    docstring); whether it had to. `superuser_url` names the superuser's password file."""
    hba = datadir / "pg_hba.conf"
    if requires_passwords(hba.read_text()):
        return False
    with psycopg.connect(superuser_url, autocommit=True) as conn:
        passfile = Path(str(psycopg.conninfo.conninfo_to_dict(superuser_url)["passfile"]))
        set_password(conn, SUPERUSER, passfile)
        hba.write_text(HBA)  # in place: the file keeps its owner (the server's user) and mode
        server.reload_configuration(conn)
    deadline = time.monotonic() + timeout
    while logs_in_without_password(port):
        if time.monotonic() > deadline:
            raise RuntimeError(f"the embedded Postgres still lets roles in without a password; see {log_path}")
        time.sleep(0.1)
    return True


def logs_in_without_password(port: int, role: str = SUPERUSER) -> bool:
    """Whether `role` logs in on 127.0.0.1:`port` with no password at all."""
    try:
        psycopg.connect(host="127.0.0.1", port=port, user=role, dbname="postgres", passfile="/nonexistent").close()
    except psycopg.OperationalError:
        return False
    return True
