"""Reading a Django test runner's run: which tests passed, failed or errored.

Django's runner (``runtests.py`` or ``manage.py test`` at ``--verbosity 2``)
reports each test as unittest does, on one line: its description, `` ... ``
and the result (``ok``, ``FAIL``, ``ERROR``, ``skipped 'why'``, ``expected
failure``, ``unexpected success``). A test's id is its description as printed,
``test_x (app.tests.Case)``, or the first line of its docstring, which the
runner prints on a line of its own after the name; SWE-bench's published
lists use the text before `` ... `` and so does this module, and it also keys
the result under the name line above a docstring. Output a test prints lands
between `` ... `` and its result, which then opens a later line. The
``FAIL: <id>`` and ``ERROR: <id>`` headers of the failure report count too.
"""

from __future__ import annotations

import re

from megaflow.datasets.pytest_report import TestStatus, merge

_RESULTS = {
    "ok": TestStatus.PASSED,
    "OK": TestStatus.PASSED,
    "FAIL": TestStatus.FAILED,
    "ERROR": TestStatus.ERROR,
    "expected failure": TestStatus.XFAIL,
    "unexpected success": TestStatus.XPASS,
}
# a test's name line: ``test_x (app.tests.Case)`` (``Case.test_x`` from Python 3.11)
_NAME = re.compile(r"^\w+ \([\w.]+\)$")
_HEADER = re.compile(r"^(FAIL|ERROR): (.+)$")


def _result(text: str) -> TestStatus | None:
    text = text.strip()
    if text.startswith("skipped"):
        return TestStatus.SKIPPED
    return _RESULTS.get(text)


def parse_django_report(output: str) -> dict[str, TestStatus]:
    """Map each test's id in a Django runner's output to its status; a test
    reported twice keeps its later status, but a pass never hides a failure."""
    statuses: dict[str, TestStatus] = {}

    def put(ids: list[str], status: TestStatus) -> None:
        for test in ids:
            statuses[test] = merge(statuses.get(test), status)

    pending: list[str] = []  # the test whose result is still to come, after its output
    previous = ""
    for raw in output.splitlines():
        line = raw.strip()
        if header := _HEADER.match(line):
            put(
                [header.group(2)],
                TestStatus(header.group(1) if header.group(1) == "ERROR" else "FAILED"),
            )
            pending = []
        elif " ... " in line:
            test, _, rest = line.partition(" ... ")
            ids = [test, previous] if _NAME.match(previous) and not _NAME.match(test) else [test]
            status = _result(rest)
            if status is None:
                pending = ids
            else:
                put(ids, status)
                pending = []
        elif pending and (status := _result(line)) is not None:
            put(pending, status)
            pending = []
        previous = line
    return statuses


def django_statuses_for(output: str, test_ids: list[str]) -> dict[str, TestStatus | None]:
    """The status of each expected test; ``None`` when the runner never reported it."""
    statuses = parse_django_report(output)
    return {t: statuses.get(t) for t in test_ids}
