"""Reading a pytest run: which test node ids passed, failed or errored.

Grading runs ``pytest -rA`` inside the sandbox; its short summary has one
line per test (``PASSED tests/test_x.py::test_y``), which is what this module
parses. The same parser is used by the tools that build task sets, so an
instance's FAIL_TO_PASS and PASS_TO_PASS lists mean exactly what grading sees.
"""

from __future__ import annotations

import re
from enum import StrEnum

_LINE = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+)")


class TestStatus(StrEnum):
    __test__ = False  # not a pytest test class

    PASSED = "PASSED"
    FAILED = "FAILED"
    ERROR = "ERROR"
    SKIPPED = "SKIPPED"
    XFAIL = "XFAIL"
    XPASS = "XPASS"


def parse_pytest_report(output: str) -> dict[str, TestStatus]:
    """Map each test node id in ``pytest -rA`` output to its status.

    A test that both failed and errored (a failing teardown) keeps the worse
    status; ``SKIPPED`` lines carry a location, not a node id, and are kept
    under that location.
    """
    statuses: dict[str, TestStatus] = {}
    for line in output.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        status, node = TestStatus(m.group(1)), m.group(2)
        if statuses.get(node) in (TestStatus.FAILED, TestStatus.ERROR):
            continue
        statuses[node] = status
    return statuses


def passed(status: TestStatus | None) -> bool:
    """SWE-bench counts a passed test and an expected failure as passing."""
    return status in (TestStatus.PASSED, TestStatus.XFAIL)


def statuses_for(output: str, node_ids: list[str]) -> dict[str, TestStatus | None]:
    """The status of each expected test; ``None`` when pytest never reported it.

    Matching whole summary lines against the known ids keeps ids with spaces
    (parametrized tests) intact, which a plain split would cut.
    """
    found: dict[str, TestStatus | None] = dict.fromkeys(node_ids)
    wanted = set(node_ids)
    for line in output.splitlines():
        word, _, rest = line.partition(" ")
        if word not in TestStatus.__members__:
            continue
        node = rest if rest in wanted else rest.split(" - ", 1)[0]
        if node not in wanted:
            continue
        status = TestStatus(word)
        if found[node] in (TestStatus.FAILED, TestStatus.ERROR):
            continue
        found[node] = status
    return found
