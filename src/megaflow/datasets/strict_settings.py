"""Strict grading of settings files by meaning: did a runner setting change?

``pyproject.toml``, ``setup.cfg``, ``tox.ini`` and other ``*.toml``/``*.ini``/
``*.cfg`` files mix the test runner's settings with a project's own (its
dependencies, its version, a linter's options). Strict grading
(:mod:`megaflow.datasets.strict`) lets a patch change the latter and refuses a
change to the former. A runner setting is

* in TOML: a table under ``tool`` (or at the top, as in ``pytest.toml``) whose
  name starts with ``pytest``, ``tox``, ``testenv`` or ``coverage``
  (``[tool.pytest.ini_options]``, ``[tool.pytest]``, pytest-env's
  ``[tool.pytest_env]``, ``[tool.tox]``, ``[tool.coverage.run]``), and the
  ``pytest11`` entry points that load pytest plug-ins;
* in INI/cfg: a section named so, with an optional ``tool:`` prefix
  (``[tool:pytest]``, ``[pytest]``, ``[tox]``, ``[testenv:py]``,
  ``[coverage:run]``), and ``pytest11`` under ``[options.entry_points]``.

Coverage is a runner setting because ``[coverage:run] plugins`` imports code
when pytest-cov starts. Tables of other tools (mypy, ruff, black) are left
out: the grading command runs pytest alone, and a plug-in that would read them
must first be enabled by a runner setting.

:func:`runner_settings_changed` parses both versions (``tomllib``; and
``configparser`` on the lines pytest's ``iniconfig`` sees, with interpolation
and the DEFAULT section off and duplicates tolerated), so escaped or quoted
keys, dotted keys and reordering are read for what they are. A file that does
not parse after the patch is refused: its meaning to pytest is unknown.
:func:`hunks_touch_runner` is the fallback when contents were not read: it
refuses unless every changed line is plainly in a non-runner section.
"""

from __future__ import annotations

import configparser
import re
import tomllib
from collections.abc import Iterator, Sequence
from typing import Any

RUNNER_PREFIXES = ("pytest", "tox", "testenv", "coverage")
RUNNER_WORDS = re.compile(
    r"pytest|tox|addopts|testpaths|python_files|python_classes|python_functions|"
    r"norecursedirs|filterwarnings|xfail|markers|confcutdir|rootdir|plugins",
    re.IGNORECASE,
)
_ENTRY_POINTS = ("options.entry_points", "pytest11")
_HUNK_START = re.compile(r"^@@ -(\d+)")
# TOML sections where a dotted key on one line can reach a runner table.
_TOML_OPEN = {(), ("tool",), ("project",), ("project", "entry-points")}

Section = tuple[str, ...]


class Unparsable(ValueError):
    """A settings file whose meaning to the runner cannot be read."""


def runner_name(name: str) -> bool:
    """Whether a table or section name is a test runner's."""
    return name.strip().lower().removeprefix("tool:").startswith(RUNNER_PREFIXES)


def _toml_view(doc: dict[str, Any]) -> dict[Section, Any]:
    view: dict[Section, Any] = {(k,): v for k, v in doc.items() if runner_name(k)}
    tool = doc.get("tool")
    if isinstance(tool, dict):
        view.update({("tool", k): v for k, v in tool.items() if runner_name(k)})
    project = doc.get("project")
    eps = project.get("entry-points") if isinstance(project, dict) else None
    if isinstance(eps, dict):
        view.update({("entry-points", k): v for k, v in eps.items() if k.lower() == "pytest11"})
    return view


class _Parser(configparser.ConfigParser):
    def optionxform(self, optionstr: str) -> str:
        return optionstr  # pytest reads keys as written: ``AddOpts`` is not ``addopts``


def _ini_view(text: str) -> dict[Section, Any]:
    # iniconfig splits on every line break str.splitlines() knows (\r, \f, \x1c...);
    # configparser only on \n. Give it iniconfig's lines so no section hides in a value.
    lines = text.removeprefix("\ufeff").splitlines()
    parser = _Parser(interpolation=None, strict=False, default_section="\0no default\0")
    try:
        parser.read_string("\n".join(lines))
    except configparser.Error as e:
        raise Unparsable(str(e)) from e
    view: dict[Section, Any] = {}
    for s in parser.sections():
        if runner_name(s):
            view[(s,)] = dict(parser.items(s))
        elif s.strip().lower() == _ENTRY_POINTS[0]:
            eps = parser.items(s)
            view.update({(s, k): v for k, v in eps if k.lower() == _ENTRY_POINTS[1]})
    return view


def runner_view(path: str, data: bytes) -> dict[Section, Any]:
    """The runner settings of a settings file's contents, by section."""
    try:
        text = data.decode("utf-8")
        if path.lower().endswith(".toml"):
            return _toml_view(tomllib.loads(text))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise Unparsable(str(e)) from e
    return _ini_view(text)


def runner_settings_changed(path: str, before: bytes | None, after: bytes | None) -> bool:
    """Whether the runner settings of ``path`` differ between its contents before and
    after the patch (None: the file does not exist). True when ``after`` does not
    parse; when only ``before`` does not, any change counts."""
    if before == after:
        return False
    try:
        new = runner_view(path, after) if after is not None else {}
    except Unparsable:
        return True
    try:
        old = runner_view(path, before) if before is not None else {}
    except Unparsable:
        return True
    return old != new


def _toml_header(line: str) -> tuple[bool, Section | None]:
    """Whether a TOML line is a table header, and the table it opens (None: it
    looks like one but does not read alone, as in a multi-line array)."""
    if not line.lstrip().startswith("["):
        return False, None
    try:
        node: Any = tomllib.loads(line.strip())
    except tomllib.TOMLDecodeError:
        return True, None
    path: list[str] = []
    while isinstance(node, dict) and len(node) == 1:
        key, node = next(iter(node.items()))
        path.append(key)
        node = node[-1] if isinstance(node, list) and node else node
    return True, tuple(path) or None


def _ini_header(line: str) -> tuple[bool, Section | None]:
    """Whether an INI line is a section header, and its section, as pytest's
    ``iniconfig`` reads it: ``[`` first, comments cut, ``]`` last."""
    if line[:1] == "[":
        head = re.split("[#;]", line, maxsplit=1)[0].rstrip()
        return True, (head[1:-1],) if head.endswith("]") else None
    # Indented, pytest reads it as a value; configparser may read a header.
    return (True, None) if line.lstrip().startswith("[") else (False, None)


def _nest(sec: Section, leaf: dict[str, Any]) -> dict[str, Any]:
    for key in reversed(sec):
        leaf = {key: leaf}
    return leaf


def _runner_section(sec: Section, toml: bool) -> bool:
    if toml:
        return bool(_toml_view(_nest(sec, {})))
    return bool(sec) and (runner_name(sec[0]) or sec[0].strip().lower() == _ENTRY_POINTS[0])


def _toml_keys(line: str) -> Iterator[dict[str, Any]]:
    """What a TOML line may define: itself when it reads alone, else ``key = 0`` for
    each ``=`` it could end its key at (its value may go on over more lines)."""
    try:
        yield tomllib.loads(line)
        return
    except tomllib.TOMLDecodeError:
        pass
    for i, c in enumerate(line):
        if c == "=":
            try:
                yield tomllib.loads(line[:i] + "= 0")
            except tomllib.TOMLDecodeError:
                continue


def _line_is_runner(sec: Section, line: str, toml: bool) -> bool:
    """Whether a changed line in section ``sec`` may change a runner setting."""
    if _runner_section(sec, toml) or RUNNER_WORDS.search(line):
        return True
    if not toml or sec not in _TOML_OPEN:
        return False  # a key here lands in ``sec``, which is no runner's
    return any(_toml_view(_nest(sec, keys)) for keys in _toml_keys(line))


def hunks_touch_runner(path: str, hunks: Sequence[Sequence[str]]) -> bool:
    """Whether the hunks of a settings file, read without the file, may change a
    runner setting: a changed line names one, or lies in a runner section, or its
    section cannot be told from the hunk's own lines."""
    header = _toml_header if path.lower().endswith(".toml") else _ini_header
    toml = header is _toml_header
    for hunk in hunks:
        start = _HUNK_START.match(hunk[0]) if hunk else None
        top: Section | None = () if start and int(start.group(1)) <= 1 else None
        old, new = top, top
        for raw in hunk[1:]:
            mark = raw[:1]
            for line in raw[1:].splitlines() or [""]:
                is_head, head = header(line)
                if mark not in ("+", "-"):
                    old, new = (head, head) if is_head else (old, new)
                elif is_head:
                    # A header moves the lines below it from one section to another.
                    secs = (old, new, head)
                    if any(s is None or _runner_section(s, toml) for s in secs):
                        return True
                    if RUNNER_WORDS.search(line):
                        return True
                    old, new = (head, new) if mark == "-" else (old, head)
                else:
                    sec = old if mark == "-" else new
                    if sec is None or _line_is_runner(sec, line, toml):
                        return True
    return False
