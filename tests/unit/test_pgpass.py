"""The embedded Postgres's password files and SCRAM verifiers (ops/pgpass.py, review N8)."""

from __future__ import annotations

import base64
import stat
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import psycopg
from psycopg import pq

from toolgate.ops.pgpass import HBA, passfile, password, requires_passwords, scram_verifier, with_passfile
from toolgate.scrubber import SCRUBBER


def test_each_role_has_its_own_file_made_once_readable_by_the_owner_only(tmp_path: Path) -> None:
    secrets = tmp_path / "secrets"
    owner, worker = passfile(secrets, "postgres"), passfile(secrets, "toolgate_worker")
    assert stat.S_IMODE(secrets.stat().st_mode) == 0o700
    assert {stat.S_IMODE(p.stat().st_mode) for p in (owner, worker)} == {0o600}
    assert owner.read_text().startswith("*:*:*:postgres:") and worker.read_text().startswith("*:*:*:toolgate_worker:")
    first = password(owner)
    assert len(first) >= 40 and first != password(worker)
    assert passfile(secrets, "postgres") == owner and password(owner) == first  # never replaced
    assert SCRUBBER.text(f"the password is {first}") == "the password is [REDACTED]"


def test_the_verifier_is_the_one_libpq_makes() -> None:
    made = pq.PGconn.connect(b"host=/nonexistent").encrypt_password(b"p4ss-w0rd", b"postgres", b"scram-sha-256")
    head, _ = made.decode().split("$", 1)[1].split("$")
    iterations, salt = head.split(":")
    assert scram_verifier("p4ss-w0rd", base64.b64decode(salt), int(iterations)) == made.decode()
    assert scram_verifier("p4ss-w0rd") != scram_verifier("p4ss-w0rd")  # a new salt each time


def test_a_url_names_the_file_and_no_password(tmp_path: Path) -> None:
    path = tmp_path / "secrets" / "pgpass-postgres"
    socket_url = "postgresql://postgres@%2Ftmp%2Fhome%2Fpgdata:5432/postgres"
    named = with_passfile(socket_url, path)
    assert parse_qs(urlsplit(named).query) == {"passfile": [str(path)]}
    assert psycopg.conninfo.conninfo_to_dict(named)["passfile"] == str(path)
    other = with_passfile(with_passfile(socket_url + "?connect_timeout=5", tmp_path / "old"), path)
    assert parse_qs(urlsplit(other).query) == {"connect_timeout": ["5"], "passfile": [str(path)]}
    assert urlsplit(named).password is None


def test_only_rules_that_all_ask_for_a_password_are_kept() -> None:
    assert requires_passwords(HBA)
    made_by_initdb = "local all all scram-sha-256\nhost replication all 127.0.0.1/32 scram-sha-256 # ok\n"
    assert requires_passwords(made_by_initdb)
    trusting = "# TYPE DATABASE USER ADDRESS METHOD\nlocal all all trust\nhost all all 127.0.0.1/32 trust\n"
    assert not requires_passwords(trusting)
    assert not requires_passwords(HBA + "local all postgres peer\n")
    assert not requires_passwords(HBA + "host all all 0.0.0.0/0 md5  # scram-sha-256 in a comment\n")
