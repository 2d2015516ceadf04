"""Strict grading: which parts of a patch count as test infrastructure.

Under strict grading (``grading.strict``, the default for ``train`` tasks) a
patch that changes how tests are found or run does not resolve, whatever the
tests then say: an optimiser rewarded for green tests learns to edit tests
first. Test infrastructure is

* the files the instance's tests live in and the files its test patch touches;
* any file under a directory named ``test``, ``tests`` or ``testing``, and any
  ``test_*.py``, ``*_test.py`` or ``conftest.py``;
* the runners' own settings files (``pytest.ini``, ``tox.ini``, ``noxfile.py``,
  ``.coveragerc``) and interpreter start-up hooks (``sitecustomize.py``,
  ``usercustomize.py``, ``*.pth``);
* in ``setup.cfg`` and ``pyproject.toml``, a hunk whose changed lines name a
  test-runner setting (``pytest``, ``tox``, ``addopts``, ``testpaths``...).
  A change elsewhere in those files (a dependency, a version) is allowed.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from megaflow.datasets.instance import SWEInstance
from megaflow.datasets.patches import patch_files

TEST_DIRS = frozenset({"test", "tests", "testing"})
RUNNER_FILES = frozenset(
    {"conftest.py", "pytest.ini", "tox.ini", "noxfile.py", ".coveragerc", "sitecustomize.py",
     "usercustomize.py"}
)  # fmt: skip
SHARED_SETTINGS = frozenset({"setup.cfg", "pyproject.toml"})
_RUNNER_WORDS = re.compile(
    r"pytest|tox|addopts|testpaths|python_files|python_classes|python_functions|"
    r"norecursedirs|filterwarnings|xfail|markers|confcutdir|rootdir|plugins",
    re.IGNORECASE,
)
_FILE_HEAD = re.compile(r"^diff --git a/(\S+) b/(\S+)$")


def _is_test_path(path: str) -> bool:
    p = PurePosixPath(path)
    name = p.name
    if TEST_DIRS.intersection(p.parts[:-1]) or name in RUNNER_FILES or name.endswith(".pth"):
        return True
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def _settings_hunks_touch_runner(patch: str) -> set[str]:
    """Settings files (setup.cfg, pyproject.toml) whose changed lines name a runner setting."""
    touched: set[str] = set()
    current: str | None = None
    for line in patch.splitlines():
        head = _FILE_HEAD.match(line)
        if head:
            name = PurePosixPath(head.group(2)).name
            current = head.group(2) if name in SHARED_SETTINGS else None
            continue
        if current is None or line.startswith(("+++", "---")):
            continue
        if line[:1] in "+-" and _RUNNER_WORDS.search(line):
            touched.add(current)
    return touched


def infra_changes(patch: str, instance: SWEInstance) -> list[str]:
    """The files of ``patch`` that strict grading counts as test infrastructure."""
    protected = set(patch_files(instance.test_patch)) | set(instance.test_files())
    settings = _settings_hunks_touch_runner(patch)
    return [f for f in patch_files(patch) if f in protected or f in settings or _is_test_path(f)]
