"""Unified git diffs: what they touch, and applying one in a sandbox.

:func:`parse_diff` reads a diff the way ``git apply`` does (its ``apply.c``),
so that every path ``git apply`` could write is named: C-quoted names
(``"a/t\\303\\251st.py"``), names with spaces, ``rename``/``copy`` lines,
mode-only and binary sections that have no hunk, and plain ``---``/``+++``
diffs without a ``diff --git`` line. Where git's reading is ambiguous it names
more paths, never fewer: strict grading (:mod:`megaflow.datasets.strict`)
decides by path, and a path missed here is a test file changed unseen.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from megaflow.datasets.prepare import GIT_ENV, WORKDIR
from megaflow.datasets.sources import one_file_tar
from megaflow.environment.abstract import Sandbox

PATCH_FILE = ".megaflow-eval.patch"
REGULAR_MODE = "100644"
SYMLINK_MODE = "120000"
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_INDEX_MODE = re.compile(r"^index [0-9a-fA-F]+\.\.[0-9a-fA-F]+ ([0-7]+)\s*$")
_DATE = re.compile(r"\s+\d{4}-\d\d-\d\d \d\d:\d\d(:\d\d(\.\d+)?)?( [+-]\d{4})?\s*$")
_ESCAPES = {"a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11, '"': 34, "\\": 92}
# Extended header lines git apply reads after ``diff --git`` (apply.c optable).
_OLD_NAME = ("rename from ", "rename old ", "copy from ")
_NEW_NAME = ("rename to ", "rename new ", "copy to ")
_MODE_LINES = ("old mode ", "new mode ", "deleted file mode ", "new file mode ")
_OTHER_LINES = ("similarity index ", "dissimilarity index ", "index ", "--- ", "+++ ")


@dataclass(frozen=True)
class FileDiff:
    """One file's section of a diff, reduced to the facts grading decides on."""

    paths: tuple[str, ...]
    """Every name the section gives (header, rename/copy, ---/+++), first seen first."""
    old_path: str | None
    """The name before the change; None for a new file."""
    new_path: str | None
    """The name after the change; None for a deleted file."""
    new_file: bool = False
    deleted: bool = False
    binary: bool = False
    """``GIT binary patch`` or ``Binary files ... differ``: no text to read the change from."""
    mode_change: bool = False
    """``old mode``/``new mode`` lines, or a created or indexed mode other than 100644."""
    symlink: bool = False
    """Some mode the section names is a symbolic link's (120000)."""
    hunks: tuple[tuple[str, ...], ...] = ()
    """Each hunk: its ``@@`` line, then its body lines."""


def unquote_c(text: str) -> tuple[str, str] | None:
    """Read git's C-quoted name at the start of ``text`` (which starts with ``"``):
    the name and the text after its closing quote, or None when malformed."""
    out = bytearray()
    i = 1
    while i < len(text):
        c = text[i]
        if c == '"':
            return out.decode("utf-8", "replace"), text[i + 1 :]
        if c != "\\":
            out += c.encode("utf-8", "replace")
            i += 1
            continue
        e = text[i + 1 : i + 2]
        if e in _ESCAPES:
            out.append(_ESCAPES[e])
            i += 2
        elif re.fullmatch(r"[0-3][0-7][0-7]", text[i + 1 : i + 4]):
            out.append(int(text[i + 1 : i + 4], 8))
            i += 4
        else:
            return None
    return None


def _squash(name: str) -> str:
    return re.sub(r"/{2,}", "/", name)


def _strip_prefix(name: str) -> str | None:
    """Drop the first path component (``a/``, ``b/``), as ``git apply -p1`` does."""
    slash = name.find("/")
    return _squash(name[slash + 1 :]) if slash > 0 else None


def _header_names(rest: str) -> list[str]:
    """The names in ``diff --git <rest>``; none when git could not tell them apart
    (a rename with spaces: its ``rename`` lines name the files)."""
    if rest.startswith('"'):
        first = unquote_c(rest)
        if first is None:
            return []
        tail = first[1].lstrip(" \t")
        second = unquote_c(tail) if tail.startswith('"') else (tail, "")
        names = [_strip_prefix(first[0]), _strip_prefix(second[0]) if second else None]
        return [n for n in names if n]
    quote = rest.find(' "')
    if quote > 0 and (second := unquote_c(rest[quote + 1 :])) is not None:
        names = [_strip_prefix(rest[:quote].rstrip()), _strip_prefix(second[0])]
        return [n for n in names if n]
    for i, c in enumerate(rest):
        if c in " \t":
            a, b = _strip_prefix(rest[:i]), _strip_prefix(rest[i + 1 :])
            if a and a == b:
                return [a]
    return []


def _line_name(text: str, prefix: bool, stops: str, loose: bool = False) -> list[str]:
    """The names a ``---``/``+++``/``rename`` line stands for: quoted, or cut at the
    first of ``stops``; ``loose`` (no ``diff --git`` header, where git cuts only a
    date) adds the whole text and the text without its date."""
    if text.startswith('"') and (got := unquote_c(text)) is not None:
        raw = [got[0]]
    else:
        cut = min((i for i, c in enumerate(text) if c in stops), default=len(text))
        raw = [text[:cut], text, _DATE.sub("", text)] if loose else [text[:cut]]
    names: list[str] = []
    for r in raw:
        name = _squash(r) if not prefix else _strip_prefix(r) or (_squash(r) if loose else None)
        if name and name not in names:
            names.append(name)
    return names


def _is_null(text: str) -> bool:
    return text == "/dev/null" or (text.startswith("/dev/null") and text[9].isspace())


class _Section:
    """A file section being read: names and facts as they are met."""

    def __init__(self, names: list[str]) -> None:
        self.paths: dict[str, None] = dict.fromkeys(names)
        self.old: list[str] = list(names)
        self.new: list[str] = list(names)
        self.modes: list[str] = []
        self.set_modes: list[str] = []
        self.new_file = self.deleted = self.binary = self.mode_lines = False
        self.hunks: list[tuple[str, ...]] = []

    def name(self, names: list[str], old: bool) -> None:
        self.paths.update(dict.fromkeys(names))
        (self.old if old else self.new)[:0] = names

    def done(self) -> FileDiff:
        return FileDiff(
            paths=tuple(self.paths),
            old_path=None if self.new_file or not self.old else self.old[0],
            new_path=None if self.deleted or not self.new else self.new[0],
            new_file=self.new_file,
            deleted=self.deleted,
            binary=self.binary,
            mode_change=self.mode_lines or any(m != REGULAR_MODE for m in self.set_modes),
            symlink=SYMLINK_MODE in self.modes,
            hunks=tuple(self.hunks),
        )


def _extended(sec: _Section, line: str) -> bool:
    """Read one extended header line into ``sec``; False when it is not one."""
    if line.startswith(_OLD_NAME) or line.startswith(_NEW_NAME):
        old = line.startswith(_OLD_NAME)
        sec.name(_line_name(line.split(" ", 2)[2], False, "\r\v\f"), old)
    elif line.startswith(("--- ", "+++ ")):
        text, old = line[4:], line.startswith("---")
        if _is_null(text):
            sec.new_file, sec.deleted = (True, sec.deleted) if old else (sec.new_file, True)
        else:
            sec.name(_line_name(text, True, "\t\r\v\f"), old)
    elif line.startswith(_MODE_LINES):
        mode = line.rsplit(" ", 1)[1].strip()
        sec.modes.append(mode)
        if line.startswith("new file mode "):
            sec.set_modes.append(mode)
        sec.mode_lines |= line.startswith(("old mode ", "new mode "))
        sec.new_file |= line.startswith("new file mode ")
        sec.deleted |= line.startswith("deleted file mode ")
    elif line.startswith(_OTHER_LINES):
        if m := _INDEX_MODE.match(line):
            sec.modes.append(m.group(1))
            sec.set_modes.append(m.group(1))
    else:
        return False
    return True


def _hunk(lines: list[str], i: int) -> tuple[tuple[str, ...], int] | None:
    """The hunk whose ``@@`` line is ``lines[i]``, read by its line counts as git
    does (so a body line that looks like a header stays body), and where it ends."""
    m = _HUNK.match(lines[i])
    if m is None:
        return None
    old = int(m.group(2) or 1)
    new = int(m.group(4) or 1)
    body = [lines[i]]
    i += 1
    while i < len(lines) and (old > 0 or new > 0 or lines[i].startswith("\\")):
        c = lines[i][:1]
        if c in ("", " "):
            old, new = old - 1, new - 1
        elif c == "-":
            old -= 1
        elif c == "+":
            new -= 1
        elif c != "\\":
            break
        body.append(lines[i])
        i += 1
    return tuple(body), i


def _body(sec: _Section, lines: list[str], i: int) -> int:
    """Read a section's hunks, or its binary marker; return where the section ends."""
    while i < len(lines) and (got := _hunk(lines, i)) is not None:
        sec.hunks.append(got[0])
        i = got[1]
    if i < len(lines) and not sec.hunks:
        line = lines[i].removesuffix("\r")
        if line == "GIT binary patch" or (
            line.startswith(("Binary files ", "Files ")) and line.endswith(" differ")
        ):
            sec.binary = True
            i += 1
    return i


def parse_diff(patch: str) -> list[FileDiff]:
    """Every file section of ``patch``, in order (a file may have more than one).

    Lines between sections that git apply skips as garbage are skipped here too."""
    lines = patch.split("\n")
    out: list[FileDiff] = []
    i = 0
    while i < len(lines):
        line = lines[i].removesuffix("\r")
        if line.startswith("diff --git "):
            sec = _Section(_header_names(line[len("diff --git ") :]))
            i += 1
            while i < len(lines) and _extended(sec, lines[i].removesuffix("\r")):
                i += 1
        elif (
            line.startswith("--- ")
            and i + 2 < len(lines)
            and lines[i + 1].startswith("+++ ")
            and lines[i + 2].startswith("@@ -")
        ):
            sec = _Section([])
            for text, old in ((line[4:], True), (lines[i + 1].removesuffix("\r")[4:], False)):
                if _is_null(text):
                    sec.new_file, sec.deleted = (True, sec.deleted) if old else (sec.new_file, True)
                else:
                    sec.name(_line_name(text, True, "\t", loose=True), old)
            i += 2
        else:
            i += 1
            continue
        i = _body(sec, lines, i)
        out.append(sec.done())
    return out


def patch_files(patch: str) -> list[str]:
    """Every path a git diff touches (old and new names), in first-seen order."""
    files: dict[str, None] = {}
    for diff in parse_diff(patch):
        files.update(dict.fromkeys(diff.paths))
    return list(files)


async def put_file(sandbox: Sandbox, name: str, data: bytes) -> None:
    await sandbox.upload(one_file_tar(name, data), WORKDIR)


async def apply_patch(sandbox: Sandbox, patch: bytes) -> str | None:
    """Apply a patch in the workspace; return None, or why it did not apply."""
    await put_file(sandbox, PATCH_FILE, patch)
    script = (
        f"git apply --whitespace=nowarn {PATCH_FILE} || "
        f"git apply --whitespace=nowarn --3way {PATCH_FILE}; rc=$?; rm -f {PATCH_FILE}; exit $rc"
    )
    res = await sandbox.exec(["sh", "-c", script], timeout=120, env=GIT_ENV, cwd=WORKDIR)
    return None if res.ok else (res.stderr or res.stdout).strip()[-2000:] or "git apply failed"
