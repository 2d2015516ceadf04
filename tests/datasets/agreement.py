"""What the SWE-bench agreement tests share: a case, both sides' verdicts, the check.

:mod:`tests.datasets.test_swebench_agreement` (pytest logs) and
:mod:`tests.datasets.test_swebench_agreement_django` (Django runner logs)
each read a log with MegaFlow's reader and SWE-bench's parser;
:func:`compare` grades both readings, and :func:`check` asserts that they
agree except where the case names a difference by design.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from swebench.harness.constants import FAIL_TO_PASS, PASS_TO_PASS, ResolvedStatus
from swebench.harness.grading import get_eval_tests_report, get_resolution_status

from megaflow.datasets import SWEInstance, load_instances
from megaflow.datasets.grading import score
from megaflow.datasets.pytest_report import TestStatus
from tests.datasets.conftest import MINI_SWE

FAILURE_STICKS = "a pass never hides an earlier failure of the same test in MegaFlow"


@dataclass
class Case:
    name: str
    log: str
    f2p: list[str]
    p2p: list[str]
    # test id -> reason, for each listed test whose status differs by design
    differs: dict[str, str] = field(default_factory=dict)
    # the resolved decision differs by design, for this reason
    resolved_differs: str | None = None


@dataclass
class Verdicts:
    megaflow: dict[str, str | None]
    swebench: dict[str, str | None]
    megaflow_passing: set[str]
    swebench_passing: set[str]
    megaflow_resolved: bool
    swebench_resolved: bool


def instance(f2p: list[str], p2p: list[str]) -> SWEInstance:
    """A bundled instance with these FAIL_TO_PASS and PASS_TO_PASS lists."""
    base = load_instances(MINI_SWE)[0]
    return base.model_copy(update={"FAIL_TO_PASS": f2p, "PASS_TO_PASS": p2p})


def compare(
    inst: SWEInstance,
    ours: dict[str, TestStatus | None],
    theirs: dict[str, str],
    their_status: Callable[[str], str | None],
) -> Verdicts:
    """Both readings of one log graded: MegaFlow's statuses by :func:`score`, SWE-bench's
    status map by its own report; ``their_status`` finds a listed test in that map."""
    report = score(inst, ours)
    gold = {FAIL_TO_PASS: inst.FAIL_TO_PASS, PASS_TO_PASS: inst.PASS_TO_PASS}
    tests_report: dict[str, Any] = get_eval_tests_report(theirs, gold)
    return Verdicts(
        megaflow={t: (s.value if s else None) for t, s in ours.items()},
        swebench={t: their_status(t) for t in [*inst.FAIL_TO_PASS, *inst.PASS_TO_PASS]},
        megaflow_passing={*report.fail_to_pass.passed, *report.pass_to_pass.passed},
        swebench_passing={
            *tests_report[FAIL_TO_PASS]["success"],
            *tests_report[PASS_TO_PASS]["success"],
        },
        megaflow_resolved=report.resolved,
        swebench_resolved=get_resolution_status(tests_report) == ResolvedStatus.FULL.value,
    )


def check(case: Case, judge: Callable[[Case], Verdicts]) -> bool:
    """Assert the case agrees except where it says; True when it agrees fully."""
    v = judge(case)
    differing = {t for t in v.megaflow if v.megaflow[t] != v.swebench[t]}
    assert differing == set(case.differs), (case.name, v.megaflow, v.swebench)
    if case.resolved_differs is None:
        assert v.megaflow_resolved == v.swebench_resolved, (case.name, v)
        assert v.megaflow_passing == v.swebench_passing, (case.name, v)
    else:
        assert v.megaflow_resolved != v.swebench_resolved, (case.name, v)
    return not differing and case.resolved_differs is None
