"""Secret references, resolved at call time, only inside an executor.

A contract names a secret (`secret_ref`); the value comes from the environment
(`TOOLGATE_SECRET_<REF>`, the reference upper-cased with non-alphanumerics as `_`) or from a
file `<secrets dir>/<ref>`. Values are never cached, never put in messages, and registered
with the scrubber the moment they are read, so no log line, span, result or dead letter
carries them.
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

from toolgate.scrubber import SCRUBBER


class SecretMissing(LookupError):
    """A secret reference that resolves to nothing (the reference, never a value)."""


def env_name(ref: str) -> str:
    return "TOOLGATE_SECRET_" + re.sub(r"[^A-Za-z0-9]", "_", ref).upper()


class SecretProvider:
    def __init__(self, directory: Path | None) -> None:
        self.directory = directory

    def has(self, ref: str) -> bool:
        """Whether a reference resolves, without reading (or registering) its value."""
        if os.environ.get(env_name(ref)):
            return True
        return self.directory is not None and (self.directory / ref).is_file()

    def resolve(self, ref: str) -> str:
        value = os.environ.get(env_name(ref))
        if value is None and self.directory is not None:
            path = self.directory / ref
            if path.is_file():
                value = path.read_text().strip()
        if not value:
            raise SecretMissing(f"secret reference {ref!r} resolves to nothing")
        SCRUBBER.register(value)
        return value


def generate(directory: Path, ref: str) -> Path:
    """A random secret for `ref`, a file under `directory` readable by its owner only, made once
    (an existing one is kept)."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = directory / ref
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(32))
    return path
