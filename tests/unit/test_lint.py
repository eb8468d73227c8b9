"""The code stays lint-clean and formatted (ruff), and the generated models stay fresh."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True, timeout=120)


def test_ruff_check() -> None:
    result = run("ruff", "check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format() -> None:
    result = run("ruff", "format", "--check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_todo_markers() -> None:
    markers = ("TO" + "DO", "FIX" + "ME", "X" + "XX", "HA" + "CK")
    offenders = []
    for path in REPO.rglob("*.py"):
        if any(part.startswith(".") or part in ("build", "dist") for part in path.relative_to(REPO).parts):
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if any(f"{m}:" in line or f"# {m}" in line for m in markers):
                offenders.append(f"{path.relative_to(REPO)}:{number}")
    assert not offenders, offenders
