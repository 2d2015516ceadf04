"""Strict grading reads settings files by meaning: a runner setting may not change,
anything else may, however the change is spelled."""

from __future__ import annotations

import configparser

import iniconfig
import pytest

from megaflow.datasets.strict_settings import hunks_touch_runner, runner_settings_changed

PYPROJECT = b"""[project]
name = "calc"
version = "1.0"
dependencies = ["attrs"]

[tool.black]
line-length = 100

[tool.pytest.ini_options]
testpaths = ["tests"]
xfail_strict = true
"""


@pytest.mark.parametrize(
    ("why", "after"),
    [
        ("addopts added", PYPROJECT + b'addopts = "-p evil"\n'),
        ("escaped key", PYPROJECT + b'"add\\u006fpts" = "-p evil"\n'),
        ("dotted key at the top", b'tool.pytest.ini_options.addopts = "-p evil"\n' + PYPROJECT),
        ("escaped table name", PYPROJECT + b'\n[tool."pyt\\u0065st"]\naddopts = "-x"\n'),
        ("pytest 9 table", PYPROJECT + b'\n[tool.pytest]\naddopts = ["-x"]\n'),
        ("pytest-env", PYPROJECT + b'\n[tool.pytest_env]\nEVIL = "1"\n'),
        ("coverage", PYPROJECT + b'\n[tool.coverage.run]\nplugins = ["evil"]\n'),
        ("tox", PYPROJECT + b'\n[tool.tox]\nlegacy_tox_ini = ""\n'),
        ("plug-in entry point", PYPROJECT + b'\n[project.entry-points.pytest11]\ne = "evil"\n'),
        ("runner table removed", PYPROJECT.split(b"[tool.pytest")[0]),
        ("file removed", None),
        ("does not parse", PYPROJECT + b"[tool.black\n"),
        ("not UTF-8", PYPROJECT + b"# \xff\n"),
    ],
)
def test_pyproject_runner_changes_are_refused(why: str, after: bytes | None) -> None:
    assert runner_settings_changed("pyproject.toml", PYPROJECT, after), why


@pytest.mark.parametrize(
    ("why", "after"),
    [
        ("dependency", PYPROJECT.replace(b'["attrs"]', b'["attrs", "numpy"]')),
        ("version", PYPROJECT.replace(b'"1.0"', b'"1.1"')),
        ("other tool", PYPROJECT.replace(b"100", b"120")),
        ("reordered", PYPROJECT.replace(b'testpaths = ["tests"]\nxfail_strict = true',
                                        b'xfail_strict = true\ntestpaths = [ "tests" ]')),
        ("quoted key, same key", PYPROJECT.replace(b"xfail_strict", b'"xfail_strict"')),
    ],
)  # fmt: skip
def test_pyproject_other_changes_are_allowed(why: str, after: bytes) -> None:
    assert not runner_settings_changed("pyproject.toml", PYPROJECT, after), why


def test_a_new_settings_file_counts_from_nothing() -> None:
    assert runner_settings_changed("sub/pyproject.toml", None, b"[tool.pytest.ini_options]\n")
    assert not runner_settings_changed("sub/pyproject.toml", None, b"[project]\nname = 'x'\n")
    # A base file that does not parse: any change is refused.
    assert runner_settings_changed("pyproject.toml", b"[broken", b"[project]\n")


NEUTRAL = b"[black]\nx = 1\n"  # reads the same as TOML and as INI
SETUP_CFG = b"""[metadata]
name = calc
version = 1.0

[options]
install_requires = attrs

[flake8]
max-line-length = 100

[tool:pytest]
testpaths = tests
"""


@pytest.mark.parametrize(
    ("path", "why", "after"),
    [
        ("setup.cfg", "addopts", SETUP_CFG + b"addopts = -p evil\n"),
        ("setup.cfg", "key case", SETUP_CFG.replace(b"testpaths", b"TestPaths")),
        ("setup.cfg", "[pytest]", SETUP_CFG + b"\n[pytest]\naddopts = -x\n"),
        ("setup.cfg", "coverage", SETUP_CFG + b"\n[coverage:run]\nplugins = evil\n"),
        ("setup.cfg", "entry point",
         SETUP_CFG + b"\n[options.entry_points]\npytest11 =\n  e = evil\n"),
        ("setup.cfg", "no header", b"addopts = -x\n" + SETUP_CFG),
        ("tox.ini", "tox", NEUTRAL + b"[tox]\nenvlist = py311\n"),
        ("tox.ini", "testenv", NEUTRAL + b"[testenv]\ncommands = pytest\n"),
        ("ci/extra.ini", "any ini's [pytest]", NEUTRAL + b"[pytest]\naddopts = -x\n"),
        ("ci/extra.toml", "any toml's [pytest]", NEUTRAL + b"[pytest]\naddopts = ['-x']\n"),
    ],
)  # fmt: skip
def test_ini_runner_changes_are_refused(path: str, why: str, after: bytes) -> None:
    before = NEUTRAL if after.startswith(NEUTRAL) else SETUP_CFG
    assert runner_settings_changed(path, before, after), why


@pytest.mark.parametrize(
    ("why", "after"),
    [
        ("version", SETUP_CFG.replace(b"version = 1.0", b"version = 1.1")),
        ("dependency", SETUP_CFG.replace(b"= attrs", b"= attrs\n  numpy")),
        ("flake8", SETUP_CFG.replace(b"100", b"120")),
        ("reordered", SETUP_CFG.replace(b"[metadata]\nname = calc\nversion = 1.0",
                                        b"[metadata]\nversion = 1.0\nname = calc")),
        ("duplicate section", SETUP_CFG + b"\n[flake8]\nselect = E\n"),
        ("DEFAULT is a section", SETUP_CFG + b"\n[DEFAULT]\naddopts = -x\n"),
    ],
)  # fmt: skip
def test_ini_other_changes_are_allowed(why: str, after: bytes) -> None:
    """pytest's iniconfig has no DEFAULT section that leaks into the others."""
    assert not runner_settings_changed("setup.cfg", SETUP_CFG, after), why


def test_values_are_read_as_written() -> None:
    """No interpolation: ``%`` in a runner value is text, not a parse error."""
    before = SETUP_CFG.replace(b"= tests", b"= tests\naddopts = --cov-fail-under=100%")
    after = before.replace(b"version = 1.0", b"version = 1.1")
    assert not runner_settings_changed("setup.cfg", before, after)
    assert runner_settings_changed("setup.cfg", before, after.replace(b"100%", b"0%"))


NO_RUNNER = SETUP_CFG.split(b"[tool:pytest]")[0]
HIDDEN = NO_RUNNER.replace(
    b"max-line-length = 100", b"max = 1\x0c[tool:pytest]\x0caddopts = -p evil"
)


def test_a_section_hidden_from_configparser_in_a_value_is_seen() -> None:
    """pytest's iniconfig breaks lines at form feeds (and \\r, \\x1c...), plain
    configparser only at \\n: the attack hides a runner section in a value."""
    text = HIDDEN.decode()
    plain = configparser.ConfigParser(interpolation=None)
    plain.read_string(text)
    assert "\x0c[tool:pytest]" in plain["flake8"]["max"]  # where the defence does not apply
    assert iniconfig.IniConfig("setup.cfg", data=text)["tool:pytest"]["addopts"] == "-p evil"
    assert runner_settings_changed("setup.cfg", NO_RUNNER, HIDDEN)


def _hunk(start: int, *lines: str) -> list[str]:
    return [f"@@ -{start},9 +{start},9 @@", *lines]


@pytest.mark.parametrize(
    ("why", "path", "hunk"),
    [
        ("in the runner's table", "pyproject.toml",
         _hunk(8, " [tool.pytest.ini_options]", '+addopts = "-x"')),
        ("section not in the hunk", "pyproject.toml", _hunk(30, " a = 1", "+b = 2")),
        ("escaped dotted key at the top", "pyproject.toml",
         _hunk(1, '+tool."pyt\\u0065st"."ini_\\u006fptions"."add\\u006fpts" = "-p evil"')),
        ("multi-line value under [tool]", "pyproject.toml",
         _hunk(1, " [tool]", '+"pyt\\u0065st".x = [')),
        ("header cutting the runner's table", "pyproject.toml",
         _hunk(8, " [tool.pytest.ini_options]", " testpaths = []", "+[tool.black]")),
        ("runner word", "pyproject.toml", _hunk(1, " [project]", '+x = "--strict-markers pytest"')),
        ("unreadable header", "pyproject.toml", _hunk(1, ' ["x"', "+b = 2")),
        ("escaped header", "pyproject.toml", _hunk(1, " [project]", '+[tool."pyt\\u0065st"]')),
        ("setup.cfg runner section", "setup.cfg", _hunk(9, " [tool:pytest]", "+x = 1")),
        ("indented header", "setup.cfg", _hunk(1, " [metadata]", " x =", "   [tool:a]", "+y = 1")),
        ("form feed hides a header", "setup.cfg",
         _hunk(1, " [flake8]", "+max = 1\x0c[coverage:run]\x0cbranch = true")),
        ("escaped entry point", "pyproject.toml",
         _hunk(1, " [project]", '+entry-points."pyt\\u0065st11".e = "evil"')),
    ],
)  # fmt: skip
def test_unread_settings_are_refused_unless_plainly_elsewhere(
    why: str, path: str, hunk: list[str]
) -> None:
    assert hunks_touch_runner(path, [hunk]), why


@pytest.mark.parametrize(
    ("path", "hunk"),
    [
        ("pyproject.toml", _hunk(1, " [project]", ' name = "calc"', '-version = "1.0"',
                                 '+version = "1.1"')),
        ("pyproject.toml", _hunk(2, " [project]", " dependencies = [", '+  "numpy>=1.2",', " ]")),
        ("pyproject.toml", _hunk(1, ' name = "calc"', "+# a comment")),
        ("pyproject.toml", _hunk(4, " [tool.black]", "-line-length = 100", "+line-length = 120")),
        ("setup.cfg", _hunk(1, " [metadata]", "-version = 1.0", "+version = 1.1")),
        ("setup.cfg", _hunk(1, "+[flake8]", "+select = E")),
    ],
)  # fmt: skip
def test_unread_settings_plainly_elsewhere_are_allowed(path: str, hunk: list[str]) -> None:
    assert not hunks_touch_runner(path, [hunk])
