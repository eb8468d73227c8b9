"""What toolgate asks of the Postgres server itself rather than of its tables: whether it answers,
a role's password (as a SCRAM verifier, never the password), a reload of its configuration, and
notices: LISTEN on a channel and pg_notify. The embedded stack (ops/stack/postgres.py,
ops/pgpass.py) and the stages' wake-ups (workers/runtime/wakeup.py) use them."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

PING = "SELECT 1"
RELOAD = "SELECT pg_reload_conf()"
NOTIFY = "SELECT pg_notify(%s, %s)"
PASSWORD = "ALTER ROLE {} PASSWORD {}"
LOGIN_PASSWORD = "ALTER ROLE {} LOGIN PASSWORD {}"


def ping(conn: psycopg.Connection[Any]) -> None:
    """Raises unless the server answers a query."""
    conn.execute(PING)


def reload_configuration(conn: psycopg.Connection[Any]) -> None:
    """Have the server read pg_hba.conf and its settings again (as a superuser)."""
    conn.execute(RELOAD)


def set_verifier(conn: psycopg.Connection[Any], role: str, verifier: str, login: bool = False) -> None:
    """Give `role` this SCRAM verifier as its password; and, with `login`, the right to log in."""
    statement = LOGIN_PASSWORD if login else PASSWORD
    conn.execute(sql.SQL(statement).format(sql.Identifier(role), sql.Literal(verifier)))


def listen(conn: psycopg.Connection[Any], channel: str) -> None:
    """Take notices on `channel` (an identifier of toolgate's own, never a caller's text)."""
    conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))


def notify(conn: psycopg.Connection[Any], channel: str, payload: str) -> None:
    conn.execute(NOTIFY, (channel, payload))
