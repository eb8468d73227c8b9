"""Unit tests are pure: no broker, no database. Hypothesis keeps its caches out of the repo."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis.configuration import set_hypothesis_home_dir

if not os.getenv("HYPOTHESIS_STORAGE_DIRECTORY"):
    set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "toolgate-unit-hypothesis")
