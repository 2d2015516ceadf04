"""Reading a git diff as ``git apply`` does: every path it could write is named.

The paths are checked against git's own reading (``git apply --numstat -z``)
of diffs git wrote, and against hand-written diffs that use the forms an
attacker could use instead: quoted names, renames and copies, mode-only and
binary sections, and plain ``---``/``+++`` diffs.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from megaflow.datasets.patches import parse_diff, patch_files, unquote_c
from tests.datasets.conftest import git


def _repo(root: Path, files: dict[str, bytes]) -> Path:
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base", "--allow-empty")
    return root


def _numstat(repo: Path, patch: str) -> set[str]:
    """The paths git apply reads from ``patch``: forwards, the names it writes;
    reversed, the names it reads (a rename's or a copy's source)."""
    names: set[str] = set()
    for reverse in ([], ["-R"]):
        out = subprocess.run(
            ["git", "apply", *reverse, "--numstat", "-z", "-"],
            cwd=repo, input=patch.encode(), capture_output=True, check=True,
        ).stdout.decode()  # fmt: skip
        fields = out.split("\0")
        i = 0
        while i < len(fields) - 1:
            path = fields[i].split("\t", 2)[2]
            names.update([path] if path else fields[i + 1 : i + 3])
            i += 1 if path else 3
    return names


def test_paths_match_gits_own_reading(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "r", {"sp ace.py": b"a\n", "plain.py": b"b\n", "bin.dat": b"x\0y",
                                  "keep.py": b"k\n" * 20})  # fmt: skip
    (repo / "sp ace.py").rename(repo / "sp ace 2.py")
    (repo / "sp ace 2.py").write_text("a\nc\n")
    (repo / "tést dir").mkdir()
    (repo / "tést dir" / "conftest.py").write_text("x = 1\n")
    (repo / 'we"ird\\name\t.py').write_text("q\n")
    (repo / "plain.py").chmod(0o755)
    (repo / "bin.dat").write_bytes(b"x\0z")
    (repo / "copy of keep.py").write_text("k\n" * 20 + "more\n")
    os.symlink("plain.py", repo / "link.py")
    git(repo, "add", "-A")
    for flags in (["-M", "-C", "--find-copies-harder"], ["--binary", "-M"], ["--no-renames"]):
        patch = git(repo, "diff", "--cached", *flags)
        assert set(patch_files(patch)) == _numstat(repo, patch), flags
    patch = git(repo, "diff", "--cached", "-M", "-C", "--find-copies-harder")
    by_path = {p: d for d in parse_diff(patch) for p in d.paths}
    assert by_path["tést dir/conftest.py"].new_file
    assert by_path['we"ird\\name\t.py'].new_file
    assert by_path["sp ace 2.py"].old_path == "sp ace.py"
    assert by_path["copy of keep.py"].old_path == "keep.py"
    assert by_path["plain.py"].mode_change
    assert not by_path["plain.py"].hunks
    assert by_path["bin.dat"].binary
    assert by_path["link.py"].symlink
    assert by_path["link.py"].mode_change


def test_unquote_c_reads_gits_escapes() -> None:
    assert unquote_c(r'"a/t\303\251st.py" rest') == ("a/tést.py", " rest")
    assert unquote_c(r'"x\"y\\z\tw\n"') == ('x"y\\z\tw\n', "")
    assert unquote_c(r'"bad\q"') is None
    assert unquote_c('"never closed') is None


QUOTED = r"""diff --git "a/t\303\251sts/x.py" "b/t\303\251sts/x.py"
new file mode 100644
--- /dev/null
+++ "b/t\303\251sts/x.py"
@@ -0,0 +1 @@
+x = 1
diff --git a/dir/conftest.py "b/dir/conftest.py"
deleted file mode 100644
diff --git "a/t\303\251sts/run.sh" "b/t\303\251sts/run.sh"
old mode 100644
new mode 100755
"""


def test_quoted_names_are_unquoted() -> None:
    assert patch_files(QUOTED) == ["tésts/x.py", "dir/conftest.py", "tésts/run.sh"]
    (_, deleted, mode) = parse_diff(QUOTED)
    assert mode.mode_change
    assert deleted.deleted
    assert deleted.new_path is None


RENAME_WITH_SPACES = """diff --git a/old name.py b/tests/new name.py
similarity index 100%
rename from old name.py
rename to tests/new name.py
diff --git a/src/a.py b/src/b.py
similarity index 90%
copy from src/a.py
copy to src/b.py
diff --git a/x.py b/x.py
rename old x.py
rename new conftest.py
"""


def test_rename_and_copy_lines_name_both_files() -> None:
    """``git diff --git a/x y b/z w`` cannot be split; the rename lines can (and
    git still reads the old ``rename old``/``rename new`` spelling)."""
    assert patch_files(RENAME_WITH_SPACES) == [
        "old name.py", "tests/new name.py", "src/a.py", "src/b.py", "x.py", "conftest.py",
    ]  # fmt: skip


MODES_AND_BINARY = """diff --git a/run.sh b/run.sh
old mode 100644
new mode 100755
diff --git a/conftest.py b/conftest.py
new file mode 120000
index 0000000..e69de29
--- /dev/null
+++ b/conftest.py
@@ -0,0 +1 @@
+/tmp/evil.py
\\ No newline at end of file
diff --git a/pyproject.toml b/pyproject.toml
index 1234567..89abcde 100644
GIT binary patch
literal 3
Kcmb<mr~&{1<pA>l

diff --git a/setup.cfg b/setup.cfg
index 1234567..89abcde 100644
Binary files a/setup.cfg and b/setup.cfg differ
diff --git a/a.py b/a.py
new file mode 100644
index 0000000..e69de29 120000
"""


def test_binary_and_mode_facts() -> None:
    run, link, toml, cfg, sneaky = parse_diff(MODES_AND_BINARY)
    assert run.mode_change
    assert not run.symlink
    assert not run.binary
    assert link.symlink
    assert link.mode_change
    assert link.new_file
    assert toml.binary
    assert cfg.binary
    assert not toml.mode_change
    # git apply takes the mode on an ``index`` line over ``new file mode``.
    assert sneaky.symlink
    assert sneaky.mode_change


TRADITIONAL = """Some mail text before the patch.
--- a/tests/test_x.py\t2024-01-01 00:00:00.000000000 +0000
+++ b/tests/test_x.py\t2024-01-01 00:00:01.000000000 +0000
@@ -1 +1 @@
-assert 0
+assert 1
--- /dev/null
+++ b/conftest.py 2024-01-01 00:00:01
@@ -0,0 +1 @@
+x = 1
"""


def test_plain_unified_diffs_without_a_git_header() -> None:
    """git apply applies these too: they must not slip past a ``diff --git`` regex."""
    files = patch_files(TRADITIONAL)
    assert "tests/test_x.py" in files
    assert "conftest.py" in files
    assert parse_diff(TRADITIONAL)[1].new_file


BODY_LOOKS_LIKE_HEADER = """diff --git a/notes.sql b/notes.sql
--- a/notes.sql
+++ b/notes.sql
@@ -1 +1 @@
--- a/conftest.py
+++ b/conftest.py
"""


def test_hunk_bodies_are_read_by_their_counts() -> None:
    """A removed ``-- a/conftest.py`` line is body, as git reads it, not a header."""
    assert patch_files(BODY_LOOKS_LIKE_HEADER) == ["notes.sql"]
    (diff,) = parse_diff(BODY_LOOKS_LIKE_HEADER)
    assert diff.hunks == (("@@ -1 +1 @@", "--- a/conftest.py", "+++ b/conftest.py"),)


def test_grading_callers_keep_their_paths() -> None:
    patch = "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n"
    assert patch_files(patch) == ["x.py"]
    assert patch_files("") == []
    assert patch_files("diff --git a/a//b.py b/a//b.py\nnew file mode 100644\n") == ["a/b.py"]
