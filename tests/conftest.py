"""Suite-wide fixtures and the CI rule: under CI=true nothing may skip.

Torch runs one thread per process here unless ``OMP_NUM_THREADS`` says
otherwise: the suite's models are tiny and the test processes (two xdist
workers and the programs they start) already fill the cores, so a second
thread mostly spins (a 60-step warm start beside the running suite took
2 to 4 times the wall and CPU time with two threads than with one).
"""

from __future__ import annotations

import os

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

# pytest-xdist starts its workers with COLUMNS=80. The command line's shared console
# reads COLUMNS once, when it is made, and keeps that width; every test gives the width
# it needs to the command it invokes (CliRunner's env), so the workers must not have
# one. Here, before any test module imports the command line.
os.environ.pop("COLUMNS", None)

pytest_plugins = [
    "tests.fixtures.servers",
    "tests.fixtures.sql_servers",
    "tests.fixtures.podman",
    "tests.fixtures.ordering",
]


def pytest_configure(config: pytest.Config) -> None:
    """Before xdist starts its workers, so they and what they start inherit it."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    """Under CI=true a skipped test (a missing server or binary) is a failure."""
    outcome = yield
    report = outcome.get_result()
    if IN_CI and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr
        report.longrepr = f"skipped under CI=true, which is not allowed: {reason}"
