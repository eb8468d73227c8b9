"""A verdict on an evidence bundle: one outcome per check, each `ok`, `failed` (with one sentence
saying what does not hold) or `skipped` (with why), in the order docs/evidence.md names them. The
independent verifier (verifier/toolgate_evidence/) prints the same names and statuses."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

NAMES = (
    "proposal.signature",
    "proposal.document",
    "proposal.arguments",
    "call.payload_hash",
    "call.digest",
    "approval.signatures",
    "approval.state_version",
    "approval.quorum",
    "execution.once",
    "observation.signature",
    "audit.rows",
    "audit.inclusion",
    "checkpoint.signature",
    "checkpoint.cosignatures",
    "decisions.rederived",
)


class Status(StrEnum):
    OK = "ok"
    FAILED = "failed"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str = ""

    def line(self) -> str:
        said = {Status.OK: "ok", Status.FAILED: "FAILED", Status.SKIPPED: "skipped"}[self.status]
        return f"{self.name:<24} {said}" + (f": {self.detail}" if self.detail else "")

    def as_json(self) -> dict[str, str]:
        return {"name": self.name, "status": str(self.status), "detail": self.detail}


def ok(name: str, detail: str = "") -> Check:
    return Check(name, Status.OK, detail)


def failed(name: str, detail: str) -> Check:
    return Check(name, Status.FAILED, detail)


def skipped(name: str, detail: str) -> Check:
    return Check(name, Status.SKIPPED, detail)


def first_failure(name: str, problems: list[str], fine: str = "") -> Check:
    """Failed with the first problem found (and how many more), else ok."""
    if not problems:
        return ok(name, fine)
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return failed(name, problems[0] + more)


@dataclass(frozen=True)
class Verdict:
    checks: tuple[Check, ...]

    @property
    def ok(self) -> bool:
        return all(c.status is not Status.FAILED for c in self.checks)

    def as_json(self) -> dict[str, Any]:
        return {"checks": [c.as_json() for c in self.checks], "ok": self.ok}

    def lines(self) -> list[str]:
        return [c.line() for c in self.checks]

    def status_of(self, name: str) -> Status:
        return next(c.status for c in self.checks if c.name == name)
