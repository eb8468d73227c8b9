"""How often a process encodes and decodes each record, for measuring a call's path.

With TOOLGATE_CODEC_COUNTS set to a directory, the process-wide codec (`codec()`) counts every
record it encodes, decodes and reads a projection of, by record, and the process writes its
counts there when it exits, as `<pid>.json`. `toolgate bench` run against a `toolgate up`
started with it set gives the counts per call of every stage and of the client
(docs/performance.md, "One call, one shape"). Unset, the codec counts nothing.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any, TypeVar

from toolgate.schemas.codec import Codec
from toolgate.schemas.wire import WireModel

P = TypeVar("P", bound=WireModel)


class CountingCodec(Codec):
    """The codec, counting by (operation, record)."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[str] = Counter()

    def encode(self, model: WireModel) -> bytes:
        self.counts[f"encode {type(model).__name__}"] += 1
        return super().encode(model)

    def model_of(self, data: bytes) -> WireModel:
        model = super().model_of(data)
        self.counts[f"decode {type(model).__name__}"] += 1
        return model

    def project(self, data: bytes, projection: type[P]) -> P | None:
        self.counts[f"project {projection.__name__}"] += 1
        return super().project(data, projection)

    def dump(self, directory: Path) -> None:
        record: dict[str, Any] = {"argv": sys.argv, "counts": dict(self.counts)}
        directory.mkdir(parents=True, exist_ok=True)
        (directory / f"{os.getpid()}.json").write_text(json.dumps(record, indent=1, sort_keys=True))


def counting(directory: str) -> CountingCodec:
    """A counting codec that writes its counts to `directory` when the process exits."""
    made = CountingCodec()
    atexit.register(made.dump, Path(directory))
    return made
