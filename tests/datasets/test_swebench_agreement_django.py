"""MegaFlow's reading of Django runner logs against the official ``swebench`` harness.

The Django counterpart of :mod:`tests.datasets.test_swebench_agreement`: each
hand-written log, in the format of Django's runner at ``--verbosity 2``, is
read by MegaFlow (:func:`~megaflow.datasets.grading.read_statuses` for an
instance with ``megaflow_test_format: django``, then
:func:`~megaflow.datasets.grading.score`) and by SWE-bench
(``parse_log_django``, ``get_eval_tests_report``, ``get_resolution_status``).
They must agree on each listed test's status, on which tests pass and on the
resolved decision, except where a case names a difference by design
(docs/tasks-format.md, "Agreement with the SWE-bench harness"), which must occur.
"""

from __future__ import annotations

from swebench.harness.log_parsers.python import MAP_REPO_TO_PARSER_PY, parse_log_django

from megaflow.datasets.grading import read_statuses
from tests.datasets.agreement import FAILURE_STICKS, Case, Verdicts, check, compare, instance

NO_UNITTEST_XFAIL = (
    "SWE-bench's Django parser does not read 'expected failure'; MegaFlow counts it "
    "as passing, as both do for pytest's XFAIL"
)
NO_UNITTEST_XPASS = (
    "SWE-bench's Django parser does not read 'unexpected success'; neither passes it"
)
NAME_AND_DOC = "MegaFlow also keys a result under the name line above its docstring line"
HEADER_WHOLE = "MegaFlow reads the whole id of a 'FAIL:' header; SWE-bench keeps its first word"


def judge(case: Case) -> Verdicts:
    inst = instance(case.f2p, case.p2p).model_copy(
        update={"megaflow_test_format": "django", "megaflow_test_cmd": "./runtests.py -v 2"}
    )
    ours = read_statuses(inst, "", case.log)
    theirs: dict[str, str] = parse_log_django(case.log, None)  # type: ignore[arg-type]
    return compare(inst, ours, theirs, theirs.get)


A = "test_a (app.tests.Case)"
B = "test_b (app.tests.Case)"
C = "test_c (app.tests.Case)"
RAN = "\n" + "-" * 70 + "\nRan 3 tests in 0.01s\n"

HAND_WRITTEN = [
    Case(
        "ok, FAIL and ERROR",
        f"{A} ... ok\n{B} ... FAIL\n{C} ... ERROR\n"
        + f"\n======\nERROR: {C}\n------\nTraceback...\n"
        + f"======\nFAIL: {B}\n------\nAssertionError\n"
        + RAN
        + "\nFAILED (failures=1, errors=1)\n",
        [A],
        [B, C],
    ),
    Case(
        "skipped: kept for PASS_TO_PASS, not for FAIL_TO_PASS",
        f"{A} ... ok\n{B} ... skipped 'needs postgres'\n" + RAN + "\nOK (skipped=1)\n",
        [A],
        [B],
    ),
    Case("skipped FAIL_TO_PASS test", f"{A} ... skipped 'no'\n{B} ... ok\n", [A], [B]),
    Case(
        "expected failure",
        f"{A} ... expected failure\n{B} ... ok\n" + RAN + "\nOK (expected failures=1)\n",
        [A],
        [B],
        differs={A: NO_UNITTEST_XFAIL},
        resolved_differs=NO_UNITTEST_XFAIL,
    ),
    Case(
        "unexpected success",
        f"{A} ... unexpected success\n{B} ... ok\n",
        [A],
        [B],
        differs={A: NO_UNITTEST_XPASS},
    ),
    Case(
        "docstring descriptions on their own line, listed by the docstring (as published)",
        f"{A}\nAdding two numbers gives their sum. ... ok\n{B}\nThe empty case fails. ... FAIL\n",
        ["Adding two numbers gives their sum."],
        ["The empty case fails."],
    ),
    Case(
        "docstring description, listed by the test's name",
        f"{A}\nAdding two numbers gives their sum. ... ok\n{B} ... ok\n",
        [A],
        [B],
        differs={A: NAME_AND_DOC},
        resolved_differs=NAME_AND_DOC,
    ),
    Case(
        "output interleaved between the test and its result",
        f"{A} ... Creating table app_thing\nInternal Server Error: /x/\nok\n{B} ... ok\n",
        [A],
        [B],
    ),
    Case(
        "output interleaved before a failure: the header names the test",
        f"{A} ... some output\nFAIL\n{B} ... ok\n\n======\nFAIL: {A}\n------\nAssertionError\n",
        [B],
        [A],
        differs={A: HEADER_WHOLE},
    ),
    Case(
        "Python 3.11 names, with the method in the parentheses",
        "test_a (app.tests.Case.test_a) ... ok\ntest_b (app.tests.Case.test_b) ... FAIL\n",
        ["test_a (app.tests.Case.test_a)"],
        ["test_b (app.tests.Case.test_b)"],
    ),
    Case(
        "duplicated test: the later result wins when both are results",
        f"{A} ... ok\n{B} ... ok\n{B} ... ok\n",
        [A],
        [B],
    ),
    Case(
        "duplicated test: failed, then passed",
        f"{A} ... ok\n{B} ... FAIL\n{B} ... ok\n",
        [A],
        [B],
        differs={B: FAILURE_STICKS},
        resolved_differs=FAILURE_STICKS,
    ),
    Case("the runner never ran: an import error", "ImportError: No module named 'app'\n", [A], [B]),
    Case(
        "a truncated log: the last result cut off",
        f"{A} ... ok\n{B} ... ",
        [A],
        [B],
    ),
]


def test_the_django_repository_uses_this_parser() -> None:
    """The parser compared here is the one SWE-bench uses for django/django."""
    assert MAP_REPO_TO_PARSER_PY["django/django"] is parse_log_django


def test_hand_written_django_logs_agree() -> None:
    agreeing = [c.name for c in HAND_WRITTEN if check(c, judge)]
    by_design = [c.name for c in HAND_WRITTEN if c.differs or c.resolved_differs]
    print(f"swebench agreement, hand-written Django logs: {len(agreeing)} of {len(HAND_WRITTEN)}")
    assert len(agreeing) + len(by_design) == len(HAND_WRITTEN)
