"""SWE-bench's own log parsers and report, for task sets from SWE-bench.

An instance of a repository the ``swebench`` harness knows
(``MAP_REPO_TO_PARSER_PY``, keyed by ``repo``) whose tests are read from
their log (``megaflow_test_format`` ``pytest_log`` or ``django``) is graded
the way the official harness grades it: the log is read by that
repository's parser, each listed test found as the harness finds it
(``_resolve_case``), and the verdict is its ``get_eval_tests_report`` and
``get_resolution_status``; so the decision agrees with the harness on every
log format it knows, by construction. MegaFlow's own parsers stay for task
sets that are not from SWE-bench, for strict grading (an opt-in rule of its
own) and for the ``pytest`` format, whose results come from MegaFlow's signed
reporter rather than from what the tests print.

``swebench`` is imported only here and only when used (extra ``swebench``);
without it every instance is read by MegaFlow's parsers.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

from megaflow.datasets.instance import SWEInstance
from megaflow.datasets.pytest_report import TestStatus

LOG_FORMATS = ("pytest_log", "django")


def available() -> bool:
    return importlib.util.find_spec("swebench") is not None


def harness_parser(instance: SWEInstance) -> Callable[[str, Any], dict[str, str]] | None:
    """The harness's parser of the instance's repository, for a log-read format."""
    if instance.megaflow_test_format not in LOG_FORMATS or not available():
        return None
    from swebench.harness.log_parsers.python import MAP_REPO_TO_PARSER_PY

    parser: Callable[[str, Any], dict[str, str]] | None = MAP_REPO_TO_PARSER_PY.get(instance.repo)
    return parser


def harness_verdict(
    instance: SWEInstance, log: str
) -> tuple[dict[str, TestStatus | None], list[str], list[str], bool] | None:
    """The harness's reading of ``log``: each listed test's status, the listed tests
    it counts as passing and as failing, and whether the instance is resolved;
    None when the harness has no parser for the instance."""
    parser = harness_parser(instance)
    if parser is None:
        return None
    from swebench.harness.constants import FAIL_TO_PASS, PASS_TO_PASS, ResolvedStatus
    from swebench.harness.grading import (
        _resolve_case,
        get_eval_tests_report,
        get_resolution_status,
    )

    status_map = parser(log, None)
    gold = {FAIL_TO_PASS: instance.FAIL_TO_PASS, PASS_TO_PASS: instance.PASS_TO_PASS}
    report: dict[str, dict[str, list[str]]] = get_eval_tests_report(status_map, gold)
    statuses: dict[str, TestStatus | None] = {}
    for test in [*instance.FAIL_TO_PASS, *instance.PASS_TO_PASS]:
        key = _resolve_case(test, status_map)
        word = status_map.get(key) if key else None
        known = word is not None and word in TestStatus.__members__
        statuses[test] = TestStatus(word) if known and word is not None else None
    passing = [*report[FAIL_TO_PASS]["success"], *report[PASS_TO_PASS]["success"]]
    failing = [*report[FAIL_TO_PASS]["failure"], *report[PASS_TO_PASS]["failure"]]
    resolved = get_resolution_status(report) == ResolvedStatus.FULL.value
    return statuses, passing, failing, resolved
