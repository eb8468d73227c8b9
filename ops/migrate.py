"""Apply the numbered SQL migrations in `ops/migrations/`, each once, in order.

Migrations run under a Postgres advisory lock, so several processes starting at once apply
each file exactly once; the applied ones are recorded in `public.toolgate_migrations`.
"""

from __future__ import annotations

from importlib import resources

import psycopg

LOCK_ID = 0x70_6F_6F_6C  # arbitrary, fixed: "tool"


def migration_files() -> list[tuple[str, str]]:
    root = resources.files("toolgate.ops").joinpath("migrations")
    names = sorted(p.name for p in root.iterdir() if p.name.endswith(".sql"))
    return [(name, root.joinpath(name).read_text()) for name in names]


def migrate(database_url: str) -> list[str]:
    """Apply pending migrations; return the names applied now."""
    applied_now: list[str] = []
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (LOCK_ID,))
        try:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS public.toolgate_migrations ("
                " name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
            )
            done = {r[0] for r in conn.execute("SELECT name FROM public.toolgate_migrations")}
            for name, sql in migration_files():
                if name in done:
                    continue
                with conn.transaction():
                    conn.execute(sql.encode())
                    conn.execute("INSERT INTO public.toolgate_migrations (name) VALUES (%s)", (name,))
                applied_now.append(name)
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (LOCK_ID,))
    return applied_now


def seed_demo(database_url: str) -> None:
    """Load the demo tenants, customers and invoices (idempotent)."""
    sql = resources.files("toolgate.ops").joinpath("demo_seed.sql").read_text()
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(sql.encode())
