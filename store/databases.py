"""Databases on toolgate's Postgres server, beside its own: the scratch database the Postgres-only
bench (ops/bench/pgceiling.py) creates, migrates and drops, so the running pipeline never sees its
rows. Sent on a connection in autocommit mode (neither statement runs in a transaction), and by
a role allowed to create databases."""

from __future__ import annotations

from typing import Any

import psycopg

# The name is the caller's own, made of letters, digits and underscores: written as it is.
CREATE = "CREATE DATABASE {name}"
DROP = "DROP DATABASE IF EXISTS {name} WITH (FORCE)"


def create(conn: psycopg.Connection[Any], name: str) -> None:
    """Create the empty database `name`."""
    conn.execute(CREATE.format(name=name))


def drop(conn: psycopg.Connection[Any], name: str) -> None:
    """Drop the database `name` if it exists, ending the sessions still connected to it."""
    conn.execute(DROP.format(name=name))
