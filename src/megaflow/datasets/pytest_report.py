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


_FAILING = (TestStatus.FAILED, TestStatus.ERROR)


def parse_pytest_report(output: str) -> dict[str, TestStatus]:
    """Map each test node id in ``pytest -rA`` output to its status.

    A test reported twice keeps its later status, except that a pass never
    replaces a failure (:func:`merge`); ``SKIPPED`` lines carry a location,
    not a node id, and are kept under that location.
    """
    statuses: dict[str, TestStatus] = {}
    for line in output.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        status, node = TestStatus(m.group(1)), m.group(2)
        statuses[node] = merge(statuses.get(node), status)
    return statuses


def passed(status: TestStatus | None) -> bool:
    """SWE-bench counts a passed test and an expected failure as passing."""
    return status in (TestStatus.PASSED, TestStatus.XFAIL)


def merge(old: TestStatus | None, new: TestStatus) -> TestStatus:
    """The later line wins, as in SWE-bench's parser (a teardown ``ERROR`` is
    followed by the call's ``FAILED``), but a pass never hides a failure: a test
    that failed anywhere in the log (an earlier run, a rerun plugin) failed."""
    return old if old in _FAILING and new not in _FAILING else new


def _node_of(rest: str, wanted: set[str]) -> str | None:
    """The expected id a summary line's text (after the status) reports.

    The whole text first (ids with spaces); then the text before a ``" - "``
    message, the longest such prefix first (an id may itself hold ``" - "``);
    then the text up to the first space, which is the id SWE-bench's parser
    keeps, so published FAIL_TO_PASS lists whose parametrized ids were cut at
    a space still match."""
    if rest in wanted:
        return rest
    cut = len(rest)
    while (cut := rest.rfind(" - ", 0, cut)) > 0:
        if rest[:cut] in wanted:
            return rest[:cut]
    first = rest.split(" ", 1)[0]
    return first if first in wanted else None


def _prefix_status(node: str, reported: list[tuple[str, TestStatus]]) -> TestStatus | None:
    """SWE-bench's rule for an expected id cut inside its parameters (more
    ``[`` than ``]``): the status of the reported tests it prefixes, when they
    agree on passing or not; else ``None``."""
    if node.count("[") <= node.count("]"):
        return None
    matches = [status for rest, status in reported if rest.startswith(node)]
    if not matches or len({passed(s) for s in matches}) != 1:
        return None
    return next((s for s in matches if s in _FAILING), matches[0])


def statuses_for(output: str, node_ids: list[str]) -> dict[str, TestStatus | None]:
    """The status of each expected test; ``None`` when pytest never reported it.

    Matching whole summary lines against the known ids keeps ids with spaces
    (parametrized tests) intact, which a plain split would cut; ids that a
    split did cut, as in published SWE-bench lists, are matched the way
    SWE-bench matches them (:func:`_node_of`, :func:`_prefix_status`).
    """
    found: dict[str, TestStatus | None] = dict.fromkeys(node_ids)
    wanted = set(node_ids)
    reported: list[tuple[str, TestStatus]] = []
    for line in output.splitlines():
        word, _, rest = line.partition(" ")
        if word not in TestStatus.__members__ or not rest:
            continue
        status = TestStatus(word)
        reported.append((rest, status))
        node = _node_of(rest, wanted)
        if node is not None:
            found[node] = merge(found[node], status)
    for node in node_ids:
        if found[node] is None:
            found[node] = _prefix_status(node, reported)
    return found
