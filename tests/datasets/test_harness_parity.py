"""Grading SWE-bench instances through the harness's own parsers agrees with the
``swebench`` harness on every recorded log, by construction.

The logs are the agreement tests' hand-written pytest and Django logs, where
MegaFlow's own parsers differ by design on some (named there). Here each is
graded as a run grades an instance of a repository SWE-bench knows
(``parser: swebench``, the default): :func:`~megaflow.datasets.grading.judge`
on a log-read run; and by the harness itself (its repository's parser from
``MAP_REPO_TO_PARSER_PY``, ``get_eval_tests_report``,
``get_resolution_status``). Resolved decision and passing tests must agree on
every log; the cases where MegaFlow's parsers differ must still differ with
``parser: megaflow``, so this test is not vacuous.
"""

from __future__ import annotations

import pytest
from swebench.harness.constants import FAIL_TO_PASS, PASS_TO_PASS, ResolvedStatus
from swebench.harness.grading import get_eval_tests_report, get_resolution_status
from swebench.harness.log_parsers.python import MAP_REPO_TO_PARSER_PY

from megaflow.datasets.grading import judge
from megaflow.datasets.instance import SWEInstance
from megaflow.datasets.pytest_channel import ChannelRun
from tests.datasets import test_swebench_agreement as pytest_logs
from tests.datasets import test_swebench_agreement_django as django_logs
from tests.datasets.agreement import Case, instance

CASES = [("pytest-dev/pytest", "pytest_log", c) for c in pytest_logs.HAND_WRITTEN] + [
    ("django/django", "django", c) for c in django_logs.HAND_WRITTEN
]


def _instance(repo: str, fmt: str, case: Case) -> SWEInstance:
    cmd = "./runtests.py -v 2" if fmt == "django" else "pytest"
    return instance(case.f2p, case.p2p).model_copy(
        update={"repo": repo, "megaflow_test_format": fmt, "megaflow_test_cmd": cmd}
    )


def _official(repo: str, inst: SWEInstance, log: str) -> tuple[bool, set[str]]:
    status_map = MAP_REPO_TO_PARSER_PY[repo](log, None)
    gold = {FAIL_TO_PASS: inst.FAIL_TO_PASS, PASS_TO_PASS: inst.PASS_TO_PASS}
    report = get_eval_tests_report(status_map, gold)
    passing = {*report[FAIL_TO_PASS]["success"], *report[PASS_TO_PASS]["success"]}
    return get_resolution_status(report) == ResolvedStatus.FULL.value, passing


def _run(inst: SWEInstance, log: str) -> ChannelRun:
    """A finished log-read run, as ``grading._run_logged`` leaves it (Django's
    runner reports on stderr, pytest on stdout)."""
    from megaflow.datasets.grading import read_statuses

    out, err = ("", log) if inst.megaflow_test_format == "django" else (log, "")
    run = ChannelRun(read_statuses(inst, out, err), exit_code=0)
    run.started, run.log = True, out + "\n" + err
    return run


@pytest.mark.parametrize(("repo", "fmt", "case"), CASES, ids=[c.name for _, _, c in CASES])
def test_the_harness_parser_agrees_with_the_harness(repo: str, fmt: str, case: Case) -> None:
    inst = _instance(repo, fmt, case)
    report = judge(inst, _run(inst, case.log), strict=False, harness=True)
    resolved, passing = _official(repo, inst, case.log)
    assert report.parser == "swebench"
    assert report.resolved is resolved
    assert {*report.fail_to_pass.passed, *report.pass_to_pass.passed} == passing


def test_megaflow_parsers_still_differ_where_their_cases_say() -> None:
    """The logs whose MegaFlow reading differs by design are read by the harness
    above; with ``parser: megaflow`` the difference is still there."""
    differing = [(r, f, c) for r, f, c in CASES if c.differs or c.resolved_differs]
    assert len(differing) >= 5
    changed = 0
    for repo, fmt, case in differing:
        inst = _instance(repo, fmt, case)
        ours = judge(inst, _run(inst, case.log), strict=False, harness=False)
        resolved, passing = _official(repo, inst, case.log)
        assert ours.parser == "megaflow"
        mine = {*ours.fail_to_pass.passed, *ours.pass_to_pass.passed}
        changed += ours.resolved is not resolved or mine != passing
    assert changed >= 1


def test_an_instance_the_harness_does_not_know_keeps_megaflow_parsers() -> None:
    case = pytest_logs.HAND_WRITTEN[0]
    inst = _instance("example/calc", "pytest_log", case)
    assert judge(inst, _run(inst, case.log), strict=False, harness=True).parser == "megaflow"
    inst = _instance("pytest-dev/pytest", "pytest_log", case)
    assert judge(inst, _run(inst, case.log), strict=True, harness=False).parser == "megaflow"
