"""Django-runner logs: the parser on a real unittest run, and the instance field."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pydantic import ValidationError

from megaflow.datasets import SWEInstance, load_instances
from megaflow.datasets.django_report import parse_django_report
from megaflow.datasets.grading import read_statuses, runner_command
from megaflow.datasets.pytest_report import TestStatus
from tests.datasets.conftest import MINI_SWE

MODULE = '''
import unittest

class Case(unittest.TestCase):
    def test_ok(self):
        pass

    def test_fail(self):
        self.assertEqual(1, 2)

    def test_error(self):
        raise RuntimeError("boom")

    @unittest.skip("needs postgres")
    def test_skip(self):
        pass

    @unittest.expectedFailure
    def test_xfail(self):
        self.assertEqual(1, 2)

    @unittest.expectedFailure
    def test_xpass(self):
        pass

    def test_doc(self):
        """Adding two numbers gives their sum.

        A second line the runner does not print.
        """

    def test_prints(self):
        print("output of the test", flush=True)
'''


def test_a_real_unittest_run(tmp_path: Path) -> None:
    """Django's runner reports as unittest's verbose runner does: read a real one."""
    (tmp_path / "test_mod.py").write_text(textwrap.dedent(MODULE))
    run = subprocess.run(
        [sys.executable, "-m", "unittest", "-v", "test_mod"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    got = parse_django_report(run.stdout + "\n" + run.stderr)
    name = "test_mod.Case.{0}" if sys.version_info >= (3, 11) else "test_mod.Case"

    def of(test: str) -> TestStatus | None:
        return got.get(f"{test} ({name.format(test)})")

    assert of("test_ok") is TestStatus.PASSED
    assert of("test_fail") is TestStatus.FAILED
    assert of("test_error") is TestStatus.ERROR
    assert of("test_skip") is TestStatus.SKIPPED
    assert of("test_xfail") is TestStatus.XFAIL
    assert of("test_xpass") is TestStatus.XPASS
    assert of("test_doc") is TestStatus.PASSED
    assert got["Adding two numbers gives their sum."] is TestStatus.PASSED
    assert of("test_prints") is TestStatus.PASSED


def _django(**extra: object) -> SWEInstance:
    base = load_instances(MINI_SWE)[0].to_payload()
    base.pop("megaflow_test_cmd", None)
    return SWEInstance.model_validate({**base, "megaflow_test_format": "django", **extra})


def test_django_format_needs_its_command() -> None:
    with pytest.raises(ValidationError, match="megaflow_test_cmd"):
        _django()
    inst = _django(megaflow_test_cmd="./tests/runtests.py --verbosity 2 app")
    assert runner_command(inst) == "./tests/runtests.py --verbosity 2 app"
    listed = inst.FAIL_TO_PASS[0]
    assert read_statuses(inst, "", f"{listed} ... ok\n") == {
        t: (TestStatus.PASSED if t == listed else None)
        for t in [*inst.FAIL_TO_PASS, *inst.PASS_TO_PASS]
    }


def test_pytest_stays_the_default() -> None:
    inst = load_instances(MINI_SWE)[0]
    assert inst.megaflow_test_format == "pytest"
    assert runner_command(inst).startswith(f"{inst.megaflow_test_cmd} -rA ")
