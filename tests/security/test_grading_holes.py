"""Each way an agent earned reward without fixing the bug, closed end to end.

Every test drives the scripted attacker through ``megaflow run`` on the calc
task (``add`` subtracts; the test patch adds ``test_new.py::test_add``) and
asserts the run's stored reward. Where an attack could silently break, the
attacker also proves it works where it was planted: its own pytest run in
its own sandbox reports the failing test as PASSED.
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from tests.datasets.conftest import CALC_FIXED, git, write_jsonl
from tests.security.attack import EVIL_PLUGIN, FAILING_TEST, calc_task_set, run_attack, write

pytestmark = pytest.mark.slow

PYTEST = "python3 -m pytest -rA -p no:cacheprovider test_new.py"


def assert_unrewarded(tasks: list, patch_must_contain: bytes | None = None) -> None:  # type: ignore[type-arg]
    for t in tasks:
        assert not t.success, t.grade
        assert t.reward == 0.0
        assert not t.grade["resolved"]
        if patch_must_contain is not None:
            assert patch_must_contain in t.patch


def test_moved_tags_and_branches_do_not_hide_test_edits(tmp_path: Path) -> None:
    tasks, _ = calc_task_set(tmp_path / "set")
    weak = "def test_add():\n    pass\n\n\ndef test_zero():\n    pass\n"
    stored = run_attack(tmp_path, tasks, [
        write("test_new.py", weak),
        write("test_calc.py", weak),
        "git add -A && git commit -qm weaken",
        "git tag -f megaflow-base && git branch -f main HEAD",
        "git update-ref refs/heads/base HEAD && git tag -f v0 HEAD",
        "git update-index --assume-unchanged test_calc.py || true",
    ])  # fmt: skip
    assert_unrewarded(stored, b"test_calc.py")
    (t,) = stored
    assert t.grade["statuses"]["test_new.py::test_add"] == "FAILED"


def test_replace_objects_cannot_swap_the_base(tmp_path: Path) -> None:
    tasks, inst = calc_task_set(tmp_path / "set")
    base = inst["base_commit"]
    stored = run_attack(tmp_path, tasks, [
        write("test_calc.py", "def test_zero():\n    pass\n"),
        "git add -A && git commit -qm weaken",
        f"git replace -f {base} HEAD",
        "git diff " + base + " --stat; echo replaced",
    ])  # fmt: skip
    assert_unrewarded(stored, b"test_calc.py")


def test_planted_site_packages_and_pth_do_not_reach_the_grader(tmp_path: Path) -> None:
    tasks, _ = calc_task_set(tmp_path / "set")
    site = "$(python3 -c 'import site; print(site.getusersitepackages())')"
    stored = run_attack(tmp_path, tasks, [
        write("test_new.py", FAILING_TEST),
        f"mkdir -p {site} && printf %s {shlex.quote(EVIL_PLUGIN)} > {site}/evilplug.py",
        f"echo 'import os; os.environ.setdefault(\"PYTEST_ADDOPTS\", \"-p evilplug\")' "
        f"> {site}/evil.pth",
        f"printf %s {shlex.quote(EVIL_PLUGIN)} > /tmp/evilplug.py",
        f"echo 'import os; os.environ[\"PYTEST_ADDOPTS\"] = \"-p evilplug\"' "
        f"> {site}/sitecustomize.py",
        "echo 'export PYTEST_ADDOPTS=\"-p evilplug\"' >> ~/.profile",
        PYTEST,  # the attack works here, in the agent's own sandbox
    ])  # fmt: skip
    (t,) = stored
    assert "PASSED test_new.py::test_add" in t.observations(), t.observations()[-2000:]
    assert_unrewarded(stored)
    assert t.grade["statuses"]["test_new.py::test_add"] == "FAILED"


def test_conftest_in_the_patch_does_not_resolve_under_strict(tmp_path: Path) -> None:
    tasks, _ = calc_task_set(tmp_path / "set")
    commands = [write("conftest.py", EVIL_PLUGIN), PYTEST]
    lenient = run_attack(tmp_path / "lenient", tasks, commands, grading={"strict": False})
    strict = run_attack(tmp_path / "strict", tasks, commands, grading={"strict": True})
    # SWE-bench's harness would let a conftest.py in the patch pass: its hook
    # rewrites the reports. Under either rule MegaFlow's reporter sees the hook
    # come from a file of the patch (tampered); the strict rule refuses the file.
    assert_unrewarded(lenient, b"conftest.py")
    assert lenient[0].grade["tampered"] is True
    assert any("conftest.py" in r for r in lenient[0].grade["tamper_reasons"])
    assert_unrewarded(strict, b"conftest.py")
    assert "test infrastructure" in (strict[0].grade["error"] or "")


def test_train_tasks_are_graded_strictly_by_default(tmp_path: Path) -> None:
    tasks, _ = calc_task_set(tmp_path / "set")
    stored = run_attack(tmp_path, tasks, [write("conftest.py", EVIL_PLUGIN)], task_type="train")
    assert_unrewarded(stored, b"conftest.py")
    assert stored[0].grade["strict"] is True


def test_a_committed_fix_is_in_the_stored_patch(tmp_path: Path) -> None:
    """Committing the fix and moving the tag no longer empties the patch: the
    patch is taken against the base sha and carries the fix it is rewarded for."""
    tasks, _ = calc_task_set(tmp_path / "set")
    stored = run_attack(tmp_path, tasks, [
        write("calc.py", CALC_FIXED),
        "git add -A && git commit -qm fix && git tag -f megaflow-base",
        "git branch -f main HEAD && git reflog expire --expire=now --all",
    ])  # fmt: skip
    (t,) = stored
    assert t.reward == 1.0
    assert b"return a + b" in t.patch
    assert t.grade["model_patch"].encode() == t.patch


def test_background_processes_cannot_tamper_with_grading(tmp_path: Path) -> None:
    tasks, _ = calc_task_set(tmp_path / "set")
    stop_pytests = "while :; do pkill -STOP -f pytest; sleep 0.05; done"
    forge = (
        "while :; do for f in /proc/[0-9]*/fd/1 /proc/[0-9]*/fd/0; do "
        "printf 'forged' > $f 2>/dev/null; done; sleep 0.05; done"
    )
    stored = run_attack(tmp_path, tasks, [
        write("test_new.py", FAILING_TEST),
        f"setsid sh -c {shlex.quote(stop_pytests)} >/dev/null 2>&1 < /dev/null &",
        f"setsid sh -c {shlex.quote(forge)} >/dev/null 2>&1 < /dev/null &",
        f"(setsid sh -c 'sleep 1; printf %s {shlex.quote(CALC_FIXED)} > calc.py' &) ; true",
    ])  # fmt: skip
    (t,) = stored
    assert_unrewarded(stored)
    # the late "fix" was killed before the patch was taken
    assert b"calc.py" not in t.patch
    assert t.grade["statuses"]["test_new.py::test_add"] == "FAILED"


def _bundle_with_later_fix(root: Path) -> tuple[Path, str]:
    """A bundle task set whose bundle also holds a later commit with the fix
    (on another branch, and tagged), as a published history would."""
    tasks, inst = calc_task_set(root)
    repo = root / "calc"
    git(repo, "checkout", "-q", "-b", "upstream")
    (repo / "calc.py").write_text(CALC_FIXED)
    git(repo, "commit", "-qam", "the fix")
    git(repo, "tag", "v1.0-fixed")
    fix = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "main")
    subprocess.run(["git", "bundle", "create", "-q", str(root / "calc.bundle"), "--all"],
                   cwd=repo, check=True)  # fmt: skip
    inst["megaflow_source"] = {"type": "git_bundle", "path": "calc.bundle"}
    write_jsonl(tasks, [inst])
    return tasks, fix


def test_no_future_history_reaches_the_agent(tmp_path: Path) -> None:
    tasks, fix = _bundle_with_later_fix(tmp_path / "set")
    stored = run_attack(tmp_path, tasks, [
        "echo commits=$(git log --all --format=%H | wc -l) refs=$(git for-each-ref | wc -l)",
        "echo tags=[$(git tag -l)] branches=[$(git branch -a --format='%(refname)')]",
        "echo remotes=[$(git remote)] reflog=$(git reflog --all | wc -l)",
        f"git cat-file -t {fix} || echo no-such-object",
        f"git checkout {fix} -- calc.py || git checkout v1.0-fixed -- calc.py || true",
        "git fsck --lost-found --no-reflogs 2>&1 | head -5; ls .git/lost-found 2>&1 || true",
        f"cat .git/packed-refs 2>/dev/null; grep -rl {fix} .git 2>/dev/null | head; true",
    ])  # fmt: skip
    (t,) = stored
    obs = t.observations()
    assert "commits=1 refs=1" in obs, obs
    assert "no-such-object" in obs
    assert "tags=[] branches=[refs/heads/main]" in obs
    assert "remotes=[] reflog=0" in obs
    assert_unrewarded(stored)
    assert b"calc.py" not in t.patch
