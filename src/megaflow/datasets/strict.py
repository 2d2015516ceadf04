"""Strict grading: which parts of a patch count as test infrastructure.

Under strict grading (``grading.strict``, the default for ``train`` tasks) a
patch that changes how tests are found, loaded or run does not resolve,
whatever the tests then say: an optimiser rewarded for green tests learns to
edit the tests, or the runner, first. The decision is made per file, on the
paths :func:`~megaflow.datasets.patches.parse_diff` reads the way ``git apply``
does (quoted names, renames, copies, binary and mode-only sections), and per
runner setting, on parsed settings files. Test infrastructure is

* the files the instance's tests live in and the files its test patch touches;
* any file under a directory named ``test``, ``tests`` or ``testing``, any
  ``test_*.py`` or ``*_test.py``, and ``conftest.py`` at any depth: pytest
  collects and imports them;
* ``pytest.ini``, ``.pytest.ini``, ``pytest.toml``, ``.pytest.toml``,
  ``noxfile.py``, ``.coveragerc``, and a settings file the test command names:
  any change at all;
* a runner setting in any other ``*.toml``, ``*.ini`` or ``*.cfg`` file
  (``pyproject.toml``, ``setup.cfg``, ``tox.ini``, at any depth), read by
  meaning in :mod:`megaflow.datasets.strict_settings`; a change elsewhere in
  those files (a dependency, a version) is allowed. A binary or symlinked
  settings file is refused: it cannot be read from the diff;
* what the interpreter runs before the tests: ``*.pth`` files,
  ``sitecustomize``/``usercustomize`` modules, and package metadata
  (``*.dist-info``, ``*.egg-info``), whose ``pytest11`` entry
  points pytest loads as plug-ins from any directory on ``sys.path``;
* compiled Python (``*.pyc``): an unchecked
  hash-based ``.pyc`` or pytest's assertion-rewrite cache is loaded in place
  of the source it stands for, test modules and ``conftest.py`` included;
* a module or package named like the runner or its dependencies (``pytest``,
  ``_pytest``, ``pluggy``, ``py``, ``iniconfig``, ``packaging``...) or like a
  standard-library module, at the top of the repository or of ``src/`` (on
  ``sys.path`` when tests run): it would be imported instead of the real one.
  A module the instance's reference patch edits is the project's own code
  (as when the task is pytest itself) and is not refused by this rule.

Binary changes and mode changes (symlinks included) to any of these are
refused with them; elsewhere they are the project's business.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

from megaflow.datasets.instance import SWEInstance
from megaflow.datasets.patches import FileDiff, parse_diff, patch_files
from megaflow.datasets.strict_settings import hunks_touch_runner, runner_settings_changed

TEST_DIRS = frozenset({"test", "tests", "testing"})
RUNNER_FILES = frozenset(
    {"conftest.py", "pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml", "noxfile.py",
     ".coveragerc"}
)  # fmt: skip
STARTUP_MODULES = frozenset({"sitecustomize", "usercustomize"})
SETTINGS_SUFFIXES = (".toml", ".ini", ".cfg")
PACKAGE_METADATA = (".dist-info", ".egg-info")
# What CPython's import system loads on Linux: source, bytecode, extension modules.
IMPORTABLE_SUFFIXES = (".py", ".pyc", ".so")
RUNNER_MODULES = frozenset(
    {"pytest", "_pytest", "pluggy", "py", "iniconfig", "packaging", "unittest", "exceptiongroup",
     "tomli", "colorama", "attr", "attrs", "more_itertools", "atomicwrites", "six", "execnet",
     "xdist", "coverage", "pytest_cov", "hypothesis", "typing_extensions"}
)  # fmt: skip
IMPORT_DIRS: tuple[tuple[str, ...], ...] = ((), ("src",))


def _parts(path: str) -> tuple[str, ...]:
    """A path's components, lower-cased, without empty and ``.`` parts: a rule that
    errs on case refuses a file pytest would not read, never the other way."""
    return tuple(p for p in path.lower().split("/") if p not in ("", "."))


def _runner_module(name: str) -> bool:
    return name in RUNNER_MODULES or name.startswith(("pytest", "_pytest"))


def shadow_module(path: str) -> tuple[str, str] | None:
    """(import directory, module name) when ``path`` puts a module or package named
    like the runner, its dependencies or the standard library where ``import``
    finds it before the real one."""
    parts = _parts(path)
    for base in IMPORT_DIRS:
        if parts[: len(base)] != base or len(parts) <= len(base):
            continue
        top, rest = parts[len(base)], parts[len(base) + 1 :]
        stem = top.split(".", 1)[0]
        if not rest:
            named = _runner_module(stem) or stem in sys.stdlib_module_names
            shadows = named and top.endswith(IMPORTABLE_SUFFIXES)
        elif _runner_module(top):
            shadows = rest[-1].endswith(IMPORTABLE_SUFFIXES)
        else:
            shadows = top in sys.stdlib_module_names and rest[0].split(".", 1)[0] == "__init__"
        if shadows:
            return "/".join(base), stem
    return None


def is_infra_path(path: str) -> bool:
    """Whether ``path`` counts as test infrastructure by its name and place alone."""
    parts = _parts(path)
    if not parts:
        return False
    name = parts[-1]
    if TEST_DIRS.intersection(parts[:-1]) or name in RUNNER_FILES or name.endswith(".pth"):
        return True
    if name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py")):
        return True
    if any(p.split(".", 1)[0] in STARTUP_MODULES for p in parts):
        return True
    if any(p.endswith(PACKAGE_METADATA) for p in parts):
        return True
    return name.endswith(".pyc")


def settings_files(patch: str) -> list[str]:
    """The files of ``patch`` whose contents strict grading reads: every ``*.toml``,
    ``*.ini`` and ``*.cfg`` at any depth, which pytest or a plug-in may read as
    settings. The grader passes their contents before and after the patch to
    :func:`infra_changes`."""
    return [f for f in patch_files(patch) if f.lower().endswith(SETTINGS_SUFFIXES)]


def _settings_changed(
    path: str,
    diffs: list[FileDiff],
    before: Mapping[str, bytes | None] | None,
    after: Mapping[str, bytes | None] | None,
) -> bool:
    mine = [d for d in diffs if path in d.paths]
    if any(d.binary or d.symlink for d in mine):
        return True
    if before is not None and after is not None and path in before and path in after:
        return runner_settings_changed(path, before[path], after[path])
    return any(hunks_touch_runner(path, d.hunks) for d in mine)


def infra_changes(
    patch: str,
    instance: SWEInstance,
    before: Mapping[str, bytes | None] | None = None,
    after: Mapping[str, bytes | None] | None = None,
) -> list[str]:
    """The files of ``patch`` that strict grading counts as test infrastructure.

    ``before`` and ``after`` hold the contents of the :func:`settings_files` at the
    base commit and with the patch applied (None: the file does not exist); a
    settings file missing from them is judged from its hunks alone, refused
    unless every changed line is plainly outside the runner's sections."""
    diffs = parse_diff(patch)
    protected = {_parts(f) for f in [*patch_files(instance.test_patch), *instance.test_files()]}
    own = {m for f in patch_files(instance.patch) if (m := shadow_module(f))}
    command = instance.megaflow_test_cmd
    settings = set(settings_files(patch))
    flagged: list[str] = []
    for path in patch_files(patch):
        module = shadow_module(path)
        if (
            _parts(path) in protected
            or is_infra_path(path)
            or (module is not None and module not in own)
            or (path in settings and path in command)
            or (path in settings and _settings_changed(path, diffs, before, after))
        ):
            flagged.append(path)
    return flagged
