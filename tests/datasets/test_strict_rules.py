"""Strict grading: each rule of what counts as test infrastructure, and only
PASSED counting as a pass. Every rule has a case here that no other rule
catches, so deleting the rule turns a test red."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from megaflow.datasets.grading import score
from megaflow.datasets.instance import SWEInstance
from megaflow.datasets.pytest_report import TestStatus, statuses_for
from megaflow.datasets.strict import infra_changes, settings_files

TEST_PATCH = "diff --git a/checks/data.json b/checks/data.json\n--- a/checks/data.json\n"


def _instance(**extra: Any) -> SWEInstance:
    return SWEInstance.model_validate({
        "instance_id": "calc__calc-1", "repo": "example/calc", "base_commit": "0" * 40,
        "problem_statement": "add() subtracts", "patch": "",
        "test_patch": TEST_PATCH + "+++ b/checks/data.json\n@@ -1 +1 @@\n-1\n+2\n",
        "FAIL_TO_PASS": ["checks/verify.py::test_add"],
        "PASS_TO_PASS": ["calc_check.py::test_zero"],
        "megaflow_source": {"type": "dir", "path": "calc"}, **extra,
    })  # fmt: skip


def _new(path: str, body: str = "x = 1") -> str:
    """A diff that creates ``path`` holding one line."""
    head = f"diff --git a/{path} b/{path}\nnew file mode 100644\n"
    return f"{head}--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+{body}\n"


INFRA = {
    "instance test file": "checks/verify.py",
    "another instance test file": "calc_check.py",
    "test patch file": "checks/data.json",
    "test directory": "pkg/tests/data.txt",
    "testing directory": "pkg/testing/helpers.py",
    "test_*.py": "pkg/test_calc.py",
    "*_test.py": "pkg/calc_test.py",
    "conftest.py at depth": "pkg/sub/conftest.py",
    "pytest.ini": "pkg/pytest.ini",
    ".pytest.ini": ".pytest.ini",
    "pytest.toml": "pytest.toml",
    ".pytest.toml": "pkg/.pytest.toml",
    "noxfile.py": "noxfile.py",
    ".coveragerc": "pkg/.coveragerc",
    ".pth": "pkg/evil.pth",
    "sitecustomize": "pkg/sitecustomize.py",
    "usercustomize package": "usercustomize/__init__.py",
    "dist-info": "evil-1.0.dist-info/entry_points.txt",
    "egg-info": "src/calc.egg-info/entry_points.txt",
    "compiled": "__pycache__/calc_check.cpython-311-pytest-8.3.2.pyc",
    "runner module": "pytest.py",
    "runner extension module": "_pytest.cpython-311-x86_64-linux-gnu.so",
    "runner package": "_pytest/__init__.py",
    "runner dependency's module": "pluggy/_hooks.py",
    "runner module in src": "src/pytest.py",
    "stdlib module": "site.py",
    "stdlib package": "json/__init__.py",
    "case": "PKG/Tests/x.py",
}
NOT_INFRA = [
    "calc.py", "src/calc/json.py", "src/calc/core.py", "docs/index.md", "setup.py",
    "packaging/debian/control", "html/index.html", "latest_x.py", "pkg/contest.py",
    "calc.egg", "README.md",
]  # fmt: skip


@pytest.mark.parametrize("path", INFRA.values(), ids=INFRA.keys())
def test_infrastructure_paths_are_refused(path: str) -> None:
    patch = _new("calc.py") + _new(path)
    assert infra_changes(patch, _instance()) == [path]


@pytest.mark.parametrize("path", NOT_INFRA)
def test_the_projects_own_files_are_allowed(path: str) -> None:
    assert infra_changes(_new(path), _instance()) == []


def test_a_module_the_reference_patch_edits_is_the_projects_own() -> None:
    """pytest's own tasks fix ``src/_pytest``; the runner rule must not refuse them."""
    inst = _instance(patch=_new("src/_pytest/python.py"))
    assert infra_changes(_new("src/_pytest/fixtures.py"), inst) == []
    assert infra_changes(_new("src/pluggy/_hooks.py"), inst) == ["src/pluggy/_hooks.py"]


OLD_HEAD = re.compile(r"^diff --git a/(\S+) b/(\S+)$", re.MULTILINE)
QUOTED = r"""diff --git "a/sp\303\251cial dir/conftest.py" "b/sp\303\251cial dir/conftest.py"
new file mode 100644
--- /dev/null
+++ "b/sp\303\251cial dir/conftest.py"
@@ -0,0 +1 @@
+import evil
"""
BINARY = """diff --git a/conftest.py b/conftest.py
new file mode 100644
index 0000000..3b18e51
GIT binary patch
literal 12
Tcmc~u&CE+NDa}b$O5*|m6w3r?

literal 0
HcmV?d00001

"""
TRADITIONAL = "--- a/conftest.py\n+++ b/conftest.py\n@@ -0,0 +1 @@\n+import evil\n"
MODE = "diff --git a/pkg/conftest.py b/pkg/conftest.py\nold mode 100644\nnew mode 100755\n"


@pytest.mark.parametrize("patch", [QUOTED, BINARY, TRADITIONAL, MODE])
def test_every_way_of_writing_a_file_is_seen(patch: str) -> None:
    assert len(infra_changes(patch, _instance())) == 1
    assert len(infra_changes(_new("calc.py") + patch, _instance())) == 1


def test_the_old_header_regex_missed_quoted_names() -> None:
    assert OLD_HEAD.findall(QUOTED) == []  # where the defence does not apply
    assert infra_changes(QUOTED, _instance()) == ["spécial dir/conftest.py"]


PYPROJECT = b'[project]\nname = "calc"\n\n[tool.pytest.ini_options]\ntestpaths = ["checks"]\n'
ESCAPED = PYPROJECT + b'"add\\u006fpts" = "-p evil"\n'
SETTINGS_PATCH = """diff --git a/pyproject.toml b/pyproject.toml
--- a/pyproject.toml
+++ b/pyproject.toml
@@ -4,2 +4,3 @@ name = "calc"
 [tool.pytest.ini_options]
 testpaths = ["checks"]
+"add\\u006fpts" = "-p evil"
"""


def test_settings_files_are_every_toml_ini_and_cfg() -> None:
    patch = "".join(_new(p) for p in ["pyproject.toml", "a/setup.cfg", "b/tox.INI", "c/x.py"])
    assert settings_files(patch) == ["pyproject.toml", "a/setup.cfg", "b/tox.INI"]


def test_settings_are_judged_by_their_parsed_contents() -> None:
    inst = _instance()
    before = {"pyproject.toml": PYPROJECT}
    assert infra_changes(SETTINGS_PATCH, inst, before, {"pyproject.toml": ESCAPED}) == [
        "pyproject.toml"
    ]
    version = PYPROJECT.replace(b'"calc"', b'"calc"\nversion = "2"')
    assert infra_changes(SETTINGS_PATCH, inst, before, {"pyproject.toml": version}) == []


def test_settings_without_contents_are_judged_from_their_hunks() -> None:
    """The grader's old call passes no contents: a hunk in the runner's table is
    refused, one plainly elsewhere is not."""
    assert infra_changes(SETTINGS_PATCH, _instance()) == ["pyproject.toml"]
    elsewhere = SETTINGS_PATCH.replace("[tool.pytest.ini_options]", "[tool.black]").replace(
        '"add\\u006fpts" = "-p evil"', "line-length = 100"
    )
    assert infra_changes(elsewhere, _instance()) == []


@pytest.mark.parametrize(
    "patch",
    [
        BINARY.replace("conftest.py", "pyproject.toml"),
        "diff --git a/setup.cfg b/setup.cfg\nnew file mode 120000\n--- /dev/null\n"
        "+++ b/setup.cfg\n@@ -0,0 +1 @@\n+checks/setup.cfg\n",
    ],
    ids=["binary", "symlink"],
)
def test_settings_that_cannot_be_read_from_the_diff_are_refused(patch: str) -> None:
    same = {"pyproject.toml": PYPROJECT, "setup.cfg": b""}
    assert len(infra_changes(patch, _instance(), same, same)) == 1


def test_a_settings_file_the_test_command_names_is_the_runners() -> None:
    patch = _new("ci/run.cfg", "[flake8]")
    contents = {"ci/run.cfg": b"[flake8]\n"}
    assert infra_changes(patch, _instance(), {"ci/run.cfg": None}, contents) == []
    inst = _instance(megaflow_test_cmd="python3 -m pytest -c ci/run.cfg")
    assert infra_changes(patch, inst, {"ci/run.cfg": None}, contents) == ["ci/run.cfg"]


EVIL_PLUGIN = """import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
"""


def test_package_metadata_loads_a_plugin_from_the_repository(tmp_path: Path) -> None:
    """A ``*.dist-info`` in the repository root is on ``sys.path`` for ``python -m
    pytest``; its ``pytest11`` entry point makes a failing test pass."""
    files = {
        "test_new.py": "def test_add():\n    assert 1 == 2\n",
        "evilplug.py": EVIL_PLUGIN,
        "evil-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: evil\nVersion: 1.0\n",
        "evil-1.0.dist-info/entry_points.txt": "[pytest11]\nevil = evilplug\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(exist_ok=True)
        (tmp_path / rel).write_text(text)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", "test_new.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert "PASSED test_new.py::test_add" in run.stdout  # the attack works without the rule
    patch = "".join(_new(rel) for rel in files if rel != "test_new.py")
    assert infra_changes(patch, _instance()) == [
        "evil-1.0.dist-info/METADATA",
        "evil-1.0.dist-info/entry_points.txt",
    ]


@pytest.mark.parametrize("status", [TestStatus.XFAIL, TestStatus.XPASS, TestStatus.SKIPPED])
def test_strict_grading_counts_only_passed(status: TestStatus) -> None:
    inst = _instance()
    (f2p,), (p2p,) = inst.FAIL_TO_PASS, inst.PASS_TO_PASS
    assert not score(inst, {f2p: status, p2p: TestStatus.PASSED}, strict=True).resolved
    assert not score(inst, {f2p: TestStatus.PASSED, p2p: status}, strict=True).resolved


def test_a_test_that_calls_xfail_resolves_only_under_swe_benchs_rule(tmp_path: Path) -> None:
    """A fix that makes the test call ``pytest.xfail()`` is reported XFAIL, which
    SWE-bench counts as passing and strict grading does not."""
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "verify.py").write_text(
        "import pytest\n\n\ndef test_add():\n    pytest.xfail('not today')\n"
    )
    (tmp_path / "calc_check.py").write_text("def test_zero():\n    pass\n")
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider",
         "checks/verify.py", "calc_check.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    inst = _instance()
    statuses = statuses_for(run.stdout, [*inst.FAIL_TO_PASS, *inst.PASS_TO_PASS])
    assert statuses["checks/verify.py::test_add"] is TestStatus.XFAIL
    assert score(inst, statuses).resolved
    assert not score(inst, statuses, strict=True).resolved
