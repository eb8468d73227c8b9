"""How a python tool's process ended, judged (workers/execution/confinement.py): a read cut short
changed nothing and says which bound cut it; a mutation cut short may have acted, and its key
stays PENDING; a tool that never started is known not to have acted."""

from __future__ import annotations

import copy
import errno
import signal

import pytest

from tests.unit.test_registry import document
from toolgate.contracts.admission import admit
from toolgate.contracts.contract import Contract
from toolgate.schemas.models import TaxonomyClass as T
from toolgate.workers.execution.confinement import DEFAULTS, Ending, Limits, judge, limits_for, setup
from toolgate.workers.execution.effects import Done, Effect, Failed, Unknown


def tool(*, sandbox: bool = False, mutation: bool = False, limits: dict[str, int] | None = None) -> Contract:
    doc = copy.deepcopy(document("invoice.tax_estimate"))
    doc["contract"]["runtime"]["sandbox_isolated"] = sandbox
    if mutation:
        doc["contract"]["transactional"].update(side_effect_class="LOW_RISK_INTERNAL", semantics="idempotent_write")
    if limits is not None:
        doc["binding"]["executor"]["limits"] = limits
    return admit(doc, "test")


def code(effect: Effect) -> tuple[T, str, bool]:
    assert isinstance(effect, Failed), effect
    return effect.taxonomy, effect.errors[0].code, effect.final


def raised(kind: str, number: int | None = None) -> Ending:
    return Ending({"raised": {"type": kind, "errno": number, "message": "no"}}, 0)


def test_limits_are_the_bindings_over_the_defaults() -> None:
    assert limits_for(tool()) == DEFAULTS
    assert limits_for(tool(limits={"memory_mb": 128})) == Limits(memory_mb=128)
    told = setup(tool(sandbox=True, limits={"cpu_seconds": 2}), "/scratch")
    assert told["sandbox"] is True and told["limits"]["cpu_seconds"] == 2 and told["scratch"] == "/scratch"


def test_an_answer_is_done() -> None:
    assert judge(tool(), Ending({"ok": {"a": 1}}, None)) == Done({"a": 1})


@pytest.mark.parametrize(
    ("sandbox", "ending", "expected"),
    [
        (False, raised("MemoryError"), (T.BUDGET_EXHAUSTED, "memory_limit", True)),
        (True, raised("PermissionError", errno.EACCES), (T.POLICY_VIOLATION, "sandbox_denied", True)),
        (True, raised("OSError", errno.ENETUNREACH), (T.POLICY_VIOLATION, "sandbox_denied", True)),
        (False, raised("PermissionError", errno.EACCES), (T.UNKNOWN_ERROR, "tool_raised", True)),
        (True, raised("KeyError"), (T.UNKNOWN_ERROR, "tool_raised", True)),
        (
            False,
            Ending({"unready": {"type": "ImportError", "message": "no"}}, 0),
            (T.DEPENDENCY_UNAVAILABLE, "tool_unready", True),
        ),
        (False, Ending(None, -9, killed_at_deadline=True), (T.TIMEOUT, "deadline_killed", False)),
        (False, Ending(None, -signal.SIGXCPU), (T.BUDGET_EXHAUSTED, "cpu_limit", True)),
        (False, Ending(None, -signal.SIGSEGV), (T.UNKNOWN_ERROR, "crashed", True)),
        (False, Ending(None, 1), (T.UNKNOWN_ERROR, "crashed", True)),
    ],
)
def test_a_read_cut_short_is_a_typed_failure(sandbox: bool, ending: Ending, expected: tuple[T, str, bool]) -> None:
    assert code(judge(tool(sandbox=sandbox), ending)) == expected


@pytest.mark.parametrize(
    "ending", [Ending(None, -9, killed_at_deadline=True), Ending(None, -signal.SIGXCPU), Ending(None, -signal.SIGSEGV)]
)
def test_a_mutation_that_died_may_have_acted(ending: Ending) -> None:
    assert isinstance(judge(tool(mutation=True), ending), Unknown)


def test_a_mutation_that_never_started_or_raised_is_a_final_failure() -> None:
    unready = Ending({"unready": {"type": "ImportError", "message": "no"}}, 0)
    assert code(judge(tool(mutation=True), unready))[0] is T.DEPENDENCY_UNAVAILABLE
    assert code(judge(tool(mutation=True), raised("ValueError")))[0] is T.UNKNOWN_ERROR


def test_a_mutation_whose_call_never_reached_its_process_did_not_act() -> None:
    slow = Ending(None, -9, killed_at_deadline=True, sent=False)
    assert code(judge(tool(mutation=True), slow)) == (T.TIMEOUT, "deadline_killed", False)
    died = Ending(None, -9, sent=False)
    assert code(judge(tool(mutation=True), died)) == (T.DEPENDENCY_UNAVAILABLE, "tool_unready", False)
