"""The secret scrubber: every secret value the secret provider resolves (and each deployment
secret and Postgres password toolgate holds) is registered here; log records, spans, results,
errors and dead letters pass through it before they leave a process. Apart from telemetry so
that whatever registers a secret needs nothing of OpenTelemetry."""

from __future__ import annotations

import re
import threading
from typing import Any


class Scrubber:
    """Replaces every registered secret value with a fixed marker."""

    MARK = "[REDACTED]"

    def __init__(self) -> None:
        self._values: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        self._lock = threading.Lock()

    def register(self, value: str) -> None:
        if len(value) < 4:  # too short to scrub without mangling ordinary text
            return
        with self._lock:
            if value not in self._values:
                self._values.add(value)
                alternatives = sorted(self._values, key=len, reverse=True)
                self._pattern = re.compile("|".join(re.escape(v) for v in alternatives))

    def text(self, value: str) -> str:
        pattern = self._pattern
        return pattern.sub(self.MARK, value) if pattern is not None else value

    def obj(self, value: Any) -> Any:
        """Scrub every string inside a JSON-like value."""
        if self._pattern is None:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(str(k)): self.obj(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.obj(v) for v in value]
        return value

    def bytes(self, value: bytes) -> bytes:
        pattern = self._pattern
        if pattern is None:
            return value
        for secret in self._values:
            value = value.replace(secret.encode(), self.MARK.encode())
        return value


SCRUBBER = Scrubber()
