"""A python tool runs in a child process of its own (workers/execution/children.py, runner.py):
killed with everything it started at its deadline, held to its memory and CPU limits, a crash a
typed answer, and, sandboxed, with no network and no filesystem but its scratch directory. Real
processes, a real kernel: nothing here is mocked."""

from __future__ import annotations

import asyncio
import copy
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.unit.factories import job_record
from tests.unit.test_registry import document
from toolgate.contracts.admission import admit
from toolgate.schemas.models import TaxonomyClass
from toolgate.scrubber import SCRUBBER
from toolgate.secrets import SecretProvider
from toolgate.workers.execution.children import Children
from toolgate.workers.execution.effects import Done, Effect, Failed, Job, Unknown

REPO = Path(__file__).resolve().parent.parent.parent


@pytest.fixture(autouse=True)
def importable(monkeypatch: pytest.MonkeyPatch) -> None:
    """The child imports the escaping tool as the worker would: from the PYTHONPATH."""
    monkeypatch.setenv("PYTHONPATH", str(REPO))


def job(
    *,
    sandbox: bool,
    mutation: bool = False,
    timeout_ms: int = 3000,
    secrets: dict[str, str] | None = None,
    **arguments: Any,
) -> Job:
    doc = copy.deepcopy(document("invoice.tax_estimate"))
    doc["contract"]["identity"]["name"] = "test.escape"
    doc["contract"]["runtime"]["sandbox_isolated"] = sandbox
    doc["contract"]["affordance"]["input_schema"] = {"type": "object"}
    doc["contract"]["affordance"]["output_schema"] = {"type": "object"}
    if mutation:
        doc["contract"]["transactional"].update(side_effect_class="LOW_RISK_INTERNAL", semantics="idempotent_write")
        doc["contract"]["idempotency"]["required"] = True
    doc["binding"]["executor"] = {
        "kind": "python",
        "callable": "tests.escaping_tool:escape",
        "limits": {"memory_mb": 256, "cpu_seconds": 1},
    }
    if secrets:
        doc["binding"]["executor"]["secrets"] = secrets
        doc["contract"]["security"]["secrets_boundary"] = "execution_sandbox"
    contract = admit(doc, "test")
    return Job(job_record(contract, arguments), contract, "key-123", int(time.time() * 1000) + timeout_ms)


def run(*jobs: Job, secrets: SecretProvider | None = None) -> list[Effect]:
    async def all_of() -> list[Effect]:
        children = Children(secrets)
        try:
            return [await children.run(j, int(time.time() * 1000)) for j in jobs]
        finally:
            await children.close()

    return asyncio.run(all_of())


def failure(effect: Effect) -> tuple[TaxonomyClass, str]:
    assert isinstance(effect, Failed), effect
    return effect.taxonomy, effect.errors[0].code


@pytest.fixture
def listening() -> Iterator[int]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    yield server.getsockname()[1]
    server.close()


def test_a_tool_answers_from_its_own_process() -> None:
    (done,) = run(job(sandbox=False, attempt="hello"))
    assert isinstance(done, Done) and done.data["context"]["tenant_id"] == "acme"


def test_killed_at_its_deadline_with_what_it_started(tmp_path: Path) -> None:
    pid_file = tmp_path / "orphan.pid"
    started = time.monotonic()
    (read,) = run(job(sandbox=False, timeout_ms=1500, attempt="orphan", target=str(pid_file)))
    assert time.monotonic() - started < 4
    assert failure(read) == (TaxonomyClass.TIMEOUT, "deadline_killed") and not read.final
    orphan = int(pid_file.read_text())
    time.sleep(0.2)
    assert not alive(orphan)  # the grandchild went with its process group


def alive(pid: int) -> bool:
    """Running, not dead and waiting for a reaper (its parent, the runner, is gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def test_a_mutation_killed_at_its_deadline_may_have_acted() -> None:
    (effect,) = run(job(sandbox=False, mutation=True, timeout_ms=800, attempt="sleep", target="30"))
    assert isinstance(effect, Unknown) and "may have acted" in effect.reason


def test_memory_cpu_and_crash_are_typed_answers_and_the_next_call_runs() -> None:
    memory, cpu, crash, after = run(
        job(sandbox=False, attempt="memory", target="1024"),
        job(sandbox=False, timeout_ms=8000, attempt="spin"),
        job(sandbox=False, attempt="crash"),
        job(sandbox=False, attempt="hello"),
    )
    assert failure(memory) == (TaxonomyClass.BUDGET_EXHAUSTED, "memory_limit")
    assert failure(cpu) == (TaxonomyClass.BUDGET_EXHAUSTED, "cpu_limit")
    assert failure(crash) == (TaxonomyClass.UNKNOWN_ERROR, "crashed")
    assert isinstance(after, Done)


def test_a_sandboxed_tool_has_no_network(listening: int) -> None:
    outside, inside = run(
        job(sandbox=False, attempt="network", target=f"127.0.0.1:{listening}"),
        job(sandbox=True, attempt="network", target=f"127.0.0.1:{listening}"),
    )
    assert isinstance(outside, Done)  # the port is there to be reached
    assert failure(inside) == (TaxonomyClass.POLICY_VIOLATION, "sandbox_denied")


def test_no_tool_sees_the_workers_settings_or_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLGATE_SECRET_DEMO_TOKEN", "s3cret")
    monkeypatch.setenv("PGPASSWORD", "pw")
    outside, inside = run(job(sandbox=False, attempt="environment"), job(sandbox=True, attempt="environment"))
    assert outside == inside == Done({"found": []})


def test_a_sandboxed_tool_is_handed_its_secret_in_its_context_only(tmp_path: Path) -> None:
    (tmp_path / "demo-token").write_text("s3cret-handed\n")
    provider = SecretProvider(tmp_path)
    handed, missing = run(
        job(sandbox=True, secrets={"token": "demo-token"}, attempt="secret"),
        job(sandbox=True, secrets={"token": "no-such-ref"}, attempt="secret"),
        secrets=provider,
    )
    assert handed == Done({"token": "s3cret-handed"})
    assert SCRUBBER.obj(handed.data) != handed.data  # what a tool echoes is scrubbed before it is stored
    assert failure(missing) == (TaxonomyClass.DEPENDENCY_UNAVAILABLE, "secret_unresolved")


def test_a_sandboxed_tools_module_is_confined_when_it_is_imported() -> None:
    outside, inside = (job(sandbox=sandbox, attempt="") for sandbox in (False, True))
    for one in (outside, inside):
        one.contract.binding["executor"]["callable"] = "tests.escaping_import:stolen"
    unconfined, confined = run(outside, inside)
    assert isinstance(unconfined, Done) and unconfined.data["stolen"]  # /etc/passwd is there to read
    assert confined == Done({"stolen": None})


def test_a_sandboxed_tool_reaches_no_unix_socket(tmp_path: Path) -> None:
    path = str(tmp_path / "socket")
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen()
    try:
        outside, inside = run(
            job(sandbox=False, attempt="unix", target=path),
            job(sandbox=True, attempt="unix", target=path),
        )
    finally:
        server.close()
    assert isinstance(outside, Done)  # the socket is there to be reached
    assert failure(inside) == (TaxonomyClass.POLICY_VIOLATION, "sandbox_denied")


def test_a_sandboxed_tool_reads_nothing_outside_and_writes_its_scratch(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("s3cret")
    outside, inside, scratch, passwd = run(
        job(sandbox=False, attempt="read", target=str(secret)),
        job(sandbox=True, attempt="read", target=str(secret)),
        job(sandbox=True, attempt="scratch"),
        job(sandbox=True, attempt="read", target="/etc/passwd"),
    )
    assert isinstance(outside, Done)
    assert failure(inside) == (TaxonomyClass.POLICY_VIOLATION, "sandbox_denied")
    assert failure(passwd) == (TaxonomyClass.POLICY_VIOLATION, "sandbox_denied")
    assert isinstance(scratch, Done) and scratch.data["wrote"] == "mine"
    assert not os.path.exists(scratch.data["cwd"])  # the scratch went with its process


def test_a_spare_costs_a_round_trip_not_a_start() -> None:
    """The figures behind children.py's spare (printed; asserted only loosely, the machine is shared)."""

    async def timed() -> tuple[float, float]:
        children = Children()
        try:
            cold = time.perf_counter()
            await children.run(job(sandbox=True, attempt="hello"), int(time.time() * 1000))
            cold = time.perf_counter() - cold
            await asyncio.sleep(1)  # the spare is set up meanwhile
            warm = []
            for _ in range(5):
                began = time.perf_counter()
                await children.run(job(sandbox=True, attempt="hello"), int(time.time() * 1000))
                warm.append(time.perf_counter() - began)
                await asyncio.sleep(0.5)
            return cold, min(warm)
        finally:
            await children.close()

    cold, warm = asyncio.run(timed())
    print(f"a call in a process started for it: {cold * 1000:.1f} ms; with a spare: {warm * 1000:.1f} ms")
    assert warm < cold
