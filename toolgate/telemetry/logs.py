"""Structured logs: one JSON object a line on stderr, scrubbed of secrets (toolgate/scrubber.py)."""

from __future__ import annotations

import json
import logging
import logging.config
from typing import Any

from toolgate.scrubber import SCRUBBER


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and the record's fields
    (call_id, stage, action, ...), scrubbed of secrets."""

    FIELDS = ("stage", "action", "call_id", "tenant_id", "tool", "taxonomy", "count", "error")

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for name in self.FIELDS:
            if hasattr(record, name):
                entry[name] = getattr(record, name)
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return SCRUBBER.text(json.dumps(entry, default=str))


NOISY = ("kafka",)


def logging_config(level: str = "INFO") -> dict[str, Any]:
    """A dictConfig: one JSON-lines handler on stderr; the libraries' chatter at WARNING."""
    quiet = "WARNING" if logging.getLevelName(level) < logging.WARNING else level
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": JsonFormatter}},
        "handlers": {"json": {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}},
        "root": {"level": level, "handlers": ["json"]},
        "loggers": {name: {"level": quiet} for name in NOISY},
    }


def configure_logging(level: str = "INFO") -> None:
    logging.config.dictConfig(logging_config(level))
