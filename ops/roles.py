"""Who connects to Postgres as whom: workers as `toolgate_worker`, the approval console as
`toolgate_console`, migrations as the owner.

Workers hold the rights migration 0009 grants `toolgate_worker`: they append to the audit log
and its checkpoints but cannot update, delete, truncate or alter them, nor disable a trigger.
Migrations, `toolgate setup` and the operators' registry commands run as the owner of the
tables. Two settings carry the two:

    TOOLGATE_DATABASE_URL         what workers connect with: a login role that is, or is granted,
                                  toolgate_worker
    TOOLGATE_ADMIN_DATABASE_URL   the owner's, for `toolgate setup` and the operators' commands
                                  (empty: TOOLGATE_DATABASE_URL, i.e. one role for both, as before:
                                  then a worker can still cut the audit log)

On a real Postgres, once, as a role allowed to create roles:

    CREATE ROLE toolgate_worker NOLOGIN;          -- migration 0009 does this if it may
    CREATE ROLE toolgate_w LOGIN PASSWORD '...' IN ROLE toolgate_worker;

then give workers `postgresql://toolgate_w:...@db/toolgate` and `toolgate setup` the owner's URL.
The approval console (`toolgate console`) connects as a member of `toolgate_console`, which
migration 0038 grants what its pages do: read tickets, decisions and approvers, keep its sessions,
append to the audit log, and register an approver only in the transaction that burns an
invitation with its token. Give it its own login the same way (`CREATE ROLE toolgate_c LOGIN
PASSWORD '...' IN ROLE toolgate_console`) and run it with that URL as TOOLGATE_DATABASE_URL;
`toolgate up` gives its console TOOLGATE_CONSOLE_DATABASE_URL when set.

The embedded default (`toolgate up`) requires a password of every role (ops/stack/embedded.py): it lets
`toolgate_worker` and `toolgate_console` log in, each with a password of its own made into the
secrets directory, and gives the workers and the console URLs that name those passwords' files
only (ops/pgpass.py); the runtime file keeps the owner's, naming the owner's file, for operators.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

import psycopg

from toolgate.ops import pgpass

WORKER_ROLE = "toolgate_worker"
CONSOLE_ROLE = "toolgate_console"


def as_role(database_url: str, role: str) -> str:
    """The same server, database and parameters, as `role` (with no password in the URL)."""
    parts = urlsplit(database_url)
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=f"{quote(role, safe='')}@{host}"))


def with_database(database_url: str, database: str) -> str:
    """The same server, role and parameters (its password file), another database."""
    return urlunsplit(urlsplit(database_url)._replace(path="/" + quote(database, safe="")))


def embedded_role_url(admin_url: str, secrets_dir: Path, role: str) -> str:
    """Let `role` (WORKER_ROLE, CONSOLE_ROLE) log in on the embedded server with its own password
    (made once into `secrets_dir`); the URL to connect as it with, naming that password's file."""
    passfile = pgpass.passfile(secrets_dir, role)
    with psycopg.connect(admin_url, autocommit=True) as conn:
        pgpass.set_password(conn, role, passfile, login=True)
    return pgpass.with_passfile(as_role(admin_url, role), passfile)
