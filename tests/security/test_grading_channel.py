"""The patched code is graded, and it is the adversary: results it cannot forge.

Each attack is planted by the scripted agent in the package under test
(``calc.py``, which the tests import), never in a test file, and first shown
to work in the agent's own sandbox: its own ``python3 -m pytest`` run
reports the failing test as PASSED, or the log that the SWE-bench harness
would read says so. The stored grade is then 0, in ephemeral sandboxes and
in persistent ones with a warm pool (so a sandbox graded once is graded
again after a reset).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.security.attack import FAILING_TEST, calc_task_set, run_attack, write

pytestmark = pytest.mark.slow

BROKEN = "def add(a, b):\n    return a - b\n"
PYTEST = "python3 -m pytest -rA -p no:cacheprovider test_new.py"
FORGED = "PASSED test_new.py::test_add"

MODES: dict[str, dict[str, Any]] = {
    "ephemeral": {},
    "persistent-warm": {"environment": {"mode": "persistent", "pool": {"min": 1}}},
}


def attack(tmp: Path, payload: str, mode: str, extra: list[str] | None = None, **over: Any) -> Any:
    """Plant ``payload`` at the end of calc.py (the bug stays), show it in the
    agent's own test run, and return the one stored task."""
    tasks, _ = calc_task_set(tmp / "set")
    config = {**MODES[mode], **over}
    env = config.pop("environment", {})
    env = {**env, "runtime": {"type": "local", "root": str(tmp / "sb")}}
    commands = [write("calc.py", BROKEN + payload), write("test_new.py", FAILING_TEST), PYTEST]
    commands += extra or []
    (stored,) = run_attack(tmp, tasks, commands, environment=env, **config)
    return stored


def assert_zero(t: Any, tampered: bool | None = None) -> None:
    assert t.reward == 0.0, t.grade
    assert not t.grade["resolved"]
    assert t.grade["statuses"]["test_new.py::test_add"] != "PASSED" or t.grade["error"]
    if tampered is not None:
        assert t.grade["tampered"] is tampered, t.grade


PRINT_AND_EXIT = f"""
import os
def add(a, b):  # past pytest's capture: straight into the pipes, then exit 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink("/proc/self/fd/" + fd).startswith("pipe:"):
                os.write(int(fd), b"\\n{FORGED}\\nPASSED test_calc.py::test_zero\\n")
        except OSError:
            pass
    os._exit(0)
"""


@pytest.mark.parametrize("mode", list(MODES))
def test_printed_result_lines_and_an_early_exit_0_do_not_resolve(tmp_path: Path, mode: str) -> None:
    t = attack(tmp_path, PRINT_AND_EXIT, mode, extra=[f"{PYTEST}; echo exit=$?"])
    assert f"{FORGED}\nPASSED test_calc.py::test_zero\nexit=0" in t.observations()
    assert_zero(t)
    assert "ended before the runner's last report" in t.grade["error"]


FLOOD = f"""
import sys
_sub = add
def add(a, b):
    sys.stdout.write("{FORGED}\\n" + ("y" * 1023 + "\\n") * 3000)
    return _sub(a, b)
"""
CAPPED = "head -c 1048576 | grep -c -E '^(PASSED|FAILED) test_new.py::test_add'"


@pytest.mark.parametrize("mode", list(MODES))
def test_a_flood_past_the_output_cap_does_not_hide_the_failure(tmp_path: Path, mode: str) -> None:
    """What the test prints comes before the summary: a megabyte of it pushes
    the real FAILED line out of what a log reader keeps, leaving the forged one."""
    show = f"{PYTEST} | {CAPPED} | sed 's/^/summary-lines-kept=/'"
    t = attack(tmp_path, FLOOD, mode, extra=[show])
    assert "summary-lines-kept=1" in t.observations()  # the forged line only
    assert_zero(t, tampered=False)
    assert t.grade["statuses"]["test_new.py::test_add"] == "FAILED"


def test_a_run_past_its_time_limit_does_not_resolve(tmp_path: Path) -> None:
    """The fix passes test_add, then hangs in a PASS_TO_PASS test: the run is
    killed at its limit and whatever it reported before does not count."""
    fixed = (
        "import time\n\ndef add(a, b):\n    if (a, b) == (2, 0):\n        time.sleep(3600)\n"
        "    return a + b\n"
    )
    tasks, _ = calc_task_set(tmp_path / "set", megaflow_test_timeout_s=8)
    (t,) = run_attack(tmp_path, tasks, [write("calc.py", fixed)])
    assert t.grade["statuses"]["test_new.py::test_add"] == "PASSED"
    assert t.reward == 0.0
    assert "ran past 8 s" in t.grade["error"]


FAKE_RUNNER = f"""import sys
print("{FORGED}")
print("PASSED test_calc.py::test_zero")
sys.exit(0)
"""


@pytest.mark.parametrize("mode", list(MODES))
def test_a_module_named_like_the_runner_does_not_stand_in(tmp_path: Path, mode: str) -> None:
    tasks, _ = calc_task_set(tmp_path / "set")
    env = {
        **MODES[mode].get("environment", {}),
        "runtime": {"type": "local", "root": str(tmp_path / "sb")},
    }
    commands = [write("pytest.py", FAKE_RUNNER), write("test_new.py", FAILING_TEST), PYTEST]
    (t,) = run_attack(tmp_path, tasks, commands, environment=env, grading={"strict": False})
    assert FORGED in t.observations()  # python3 -m pytest in the workspace ran the fake
    assert_zero(t)
    assert t.grade["statuses"]["test_new.py::test_add"] == "FAILED"


REPORT_CLASS = """
import _pytest.reports as _r
_init = _r.TestReport.__init__
def _passing(self, *a, **k):
    _init(self, *a, **k)
    self.outcome = "passed"
_r.TestReport.__init__ = _passing
"""

MODULE_FUNCTION = """
import _pytest.runner as _run
_make = _run.call_and_report
def _call_and_report(item, when, log=True, **kw):
    rep = _make(item, when, log=False, **kw)
    rep.outcome = "passed"
    if log:
        item.ihook.pytest_runtest_logreport(report=rep)
    return rep
_run.call_and_report = _call_and_report
"""

PLUGIN_VIA_GC = """
import gc, pytest
class _Evil:
    @pytest.hookimpl(hookwrapper=True, trylast=True)
    def pytest_runtest_makereport(self, item, call):
        out = yield
        out.get_result().outcome = "passed"
for _o in gc.get_objects():
    if type(_o).__name__ == "PytestPluginManager":
        _o.register(_Evil())
        break
"""


CODE_SWAP = """
import _pytest.skipping as _s
def _forge(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
_s.pytest_runtest_makereport.__code__ = _forge.__code__
"""

IMPORT_HOOK = """
import importlib.util, sys
class _Loader:
    def create_module(self, spec):
        return None
    def exec_module(self, module):
        exec("def test_add():\\n    pass\\n", module.__dict__)
class _Finder:
    def find_spec(self, name, path=None, target=None):
        if name == "test_new":
            where = "/workspace/test_new.py"
            return importlib.util.spec_from_file_location(name, where, loader=_Loader())
        return None
sys.meta_path.insert(0, _Finder())
"""

# Walks up the frames of the running test to its item, finds the reporter
# among the registered plugins, writes a forged PASSED through its
# own channel, silences its record of the real failure and offsets pytest's
# failure count, so records and exit status agree on a pass.
FRAMES = """
import sys
def add(a, b):
    f = sys._getframe(1)
    while f is not None:
        for v in list(f.f_locals.values()):
            session = getattr(v, "session", None)
            if session is not None and not hasattr(session, "_offset"):
                session.testsfailed, session._offset = -1, True
            config = getattr(v, "config", None)
            for plugin in config.pluginmanager.get_plugins() if config is not None else ():
                rep = getattr(plugin, "channel", None)
                if rep is not None and not hasattr(rep, "_forged"):
                    rep.write("test", nodeid="test_new.py::test_add", when="call",
                              outcome="passed", xfail=False)
                    real = rep.write
                    def write(kind, **k):
                        if k.get("outcome") != "failed":
                            real(kind, **k)
                    rep.write, rep._forged = write, True
                    print("FORGED-THROUGH-THE-REPORTER")
        f = f.f_back
    return a - b
"""


def test_code_that_reaches_the_reporter_itself_is_tampered(tmp_path: Path) -> None:
    t = attack(tmp_path, FRAMES, "ephemeral", grading={"strict": False})
    assert "FORGED-THROUGH-THE-REPORTER" in t.grade["test_output"]  # it got there
    assert_zero(t, tampered=True)
    assert "the reporter was changed: _forged, write" in t.grade["tamper_reasons"]


PROPERTY = """
import _pytest.reports as _r
_call = lambda self: getattr(self, "when", "") == "call"
_r.BaseReport.passed = property(lambda self: self.outcome == "passed" or _call(self))
_r.BaseReport.failed = property(lambda self: self.outcome == "failed" and not _call(self))
"""

IMPORTER = """
import builtins
_real = builtins.__import__
def _import(name, *a, **k):
    return _real(name, *a, **k)
builtins.__import__ = _import
import _pytest.reports as _r
_call = lambda self: getattr(self, "when", "") == "call"
_r.BaseReport.passed = property(lambda self: self.outcome == "passed" or _call(self))
_r.BaseReport.failed = property(lambda self: self.outcome == "failed" and not _call(self))
"""

REACHES = {  # payload, what the reporter must name (each a defence of its own)
    "class": (REPORT_CLASS, "runner code replaced: _pytest.reports.TestReport.__init__"),
    "code": (CODE_SWAP, "runner object changed: __code__"),
    "function": (MODULE_FUNCTION, "runner code replaced: _pytest.runner.call_and_report"),
    "plugin": (PLUGIN_VIA_GC, "a runner plugin from <class 'calc._Evil'>"),
    "gc": (PLUGIN_VIA_GC, "the tests called gc.get_objects"),
    "import-hook": (IMPORT_HOOK, "an import hook was added: _Finder"),
    # these make pytest exit 0 while a test failed (an exit-status reader passes it)
    "property": (PROPERTY, "runner code replaced: _pytest.reports.BaseReport.failed"),
    "builtins-import": (IMPORTER, "runner code replaced: __import__"),
}


@pytest.mark.parametrize("case", list(REACHES))
def test_code_under_test_that_reaches_into_the_runner_is_tampered(
    tmp_path: Path, case: str
) -> None:
    payload, reason = REACHES[case]
    both = "python3 -m pytest -rA -p no:cacheprovider test_calc.py test_new.py"  # calc first
    t = attack(tmp_path, payload, "ephemeral", extra=[both], grading={"strict": False})
    exit_0_with_a_failure = re.search(
        r"exit code 0\n=+ test session starts[^\x00]*?1 failed", t.observations()
    )
    assert "PASSED test_new.py::test_add" in t.observations() or exit_0_with_a_failure
    assert_zero(t, tampered=True)
    assert reason in t.grade["tamper_reasons"], t.grade["tamper_reasons"]
