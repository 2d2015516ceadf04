"""Who failed decides the reward.

A grading environment that cannot work (its runner missing, its test patch
not applying to the base, its PASS_TO_PASS tests failing with no patch) is an
infrastructure failure: the task is retried and ends FAILED, never SUCCEEDED
with reward 0 (which would train the policy on noise). What only the agent
could have caused (a patch that breaks the test patch, a repository it
broke) stays the agent's: SUCCEEDED with reward 0 and the cause recorded.
Findings the base's own tests raise are not the patch's.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from megaflow.cli.main import app
from megaflow.core.states import TaskState
from megaflow.storage.local_artifacts import LocalArtifactStore
from megaflow.storage.sqlite import SqliteMetadataStore
from tests.datasets.conftest import CALC_FIXED, TEST_NEW, diff_of, git, write_jsonl
from tests.security.attack import calc_task_set, run_attack, run_config, write

pytestmark = pytest.mark.slow


def run(tmp: Path, tasks: Path, commands: list[str]) -> list[tuple[TaskState, float, str | None]]:
    """``megaflow run``; each task's final state, reward and error."""
    cfg = run_config(tmp, tasks, commands, max_attempts=2)
    cwd = os.getcwd()
    os.chdir(tmp)
    try:
        res = CliRunner().invoke(app, ["run", str(cfg)])
    finally:
        os.chdir(cwd)
    assert res.exit_code in (0, 1), res.output

    async def read() -> list[tuple[TaskState, float, str | None]]:
        out = []
        async with SqliteMetadataStore(str(tmp / "m.db")) as store:
            for r in await store.list_runs():
                results = {x.task_id: x for x in await store.list_results(r.id)}
                for t in await store.list_tasks(r.id):
                    res = results.get(t.id)
                    out.append(
                        (t.state, res.reward if res else 0.0, t.error or (res and res.error))
                    )
        return out

    return asyncio.run(read())


FIX = "printf 'def add(a, b):\\n    return a + b\\n' > calc.py"
STALE = (  # written against another version of calc.py
    "diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n"
    " def add(a, b):\n-    return a * b\n+    return a - b\n"
)
BROKEN_ENVIRONMENTS: dict[str, dict[str, Any]] = {
    "runner-missing": {"megaflow_test_cmd": "python3.99 -m pytest"},
    "test-patch-stale": {"test_patch": STALE},
    "pass-to-pass-fails": {"PASS_TO_PASS": ["test_calc.py::test_zero", "test_calc.py::test_gone"]},
}


@pytest.mark.parametrize("case", list(BROKEN_ENVIRONMENTS))
def test_a_broken_grading_environment_is_infrastructure(tmp_path: Path, case: str) -> None:
    tasks, _ = calc_task_set(tmp_path / "set", **BROKEN_ENVIRONMENTS[case])
    ((state, reward, error),) = run(tmp_path, tasks, [FIX])
    assert state is TaskState.FAILED, (state, error)  # retried, then failed: not a 0 sample
    assert reward == 0.0
    assert "grading environment is broken" in (error or ""), error


def test_without_calibration_the_same_environment_scores_the_fix_0(tmp_path: Path) -> None:
    """What calibration prevents: the gold fix is SUCCEEDED with reward 0."""
    tasks, _ = calc_task_set(tmp_path / "set", **BROKEN_ENVIRONMENTS["pass-to-pass-fails"])
    (t,) = run_attack(tmp_path, tasks, [FIX], grading={"calibrate": False})
    assert t.reward == 0.0
    assert b"return a + b" in t.patch


def test_what_only_the_agent_could_cause_stays_its_own(tmp_path: Path) -> None:
    """The agent fixes the bug, then breaks its repository so no patch can be
    taken: reward 0, SUCCEEDED, the cause recorded; not retried as infrastructure."""
    tasks, _ = calc_task_set(tmp_path / "set")
    ((state, reward, error),) = run(tmp_path, tasks, [FIX, "rm -rf .git"])
    assert state is TaskState.SUCCEEDED
    assert reward == 0.0
    assert "cannot take the agent's patch" in (error or ""), error


def test_findings_of_the_bases_own_tests_are_not_tampering(tmp_path: Path) -> None:
    """The base's test walks the garbage collector; the gold fix still resolves."""
    tasks, inst = calc_task_set(tmp_path / "set")
    repo = tmp_path / "set" / "calc"
    (repo / "test_calc.py").write_text(
        "import gc\nfrom calc import add\n\n\ndef test_zero():\n"
        "    assert gc.get_objects()\n    assert add(2, 0) == 2\n"
    )
    git(repo, "commit", "-qam", "a test that walks the gc")
    inst["base_commit"] = git(repo, "rev-parse", "HEAD").strip()
    inst["test_patch"] = diff_of(repo, {"test_new.py": TEST_NEW})
    inst["patch"] = diff_of(repo, {"calc.py": CALC_FIXED})
    write_jsonl(tasks, [inst])
    (t,) = run_attack(tmp_path, tasks, [FIX])
    assert t.reward == 1.0, t.grade
    assert not t.grade["tampered"]


def test_a_passed_calibration_is_kept_for_later_runs(tmp_path: Path) -> None:
    """The first run stores its calibration; a second run over the same stores
    reads it instead of grading the base again (shown by what it reads: a
    finding written into the stored calibration is honoured)."""
    tasks, _ = calc_task_set(tmp_path / "set")
    run_attack(tmp_path / "one", tasks, [FIX])
    (tmp_path / "two").mkdir()
    (tmp_path / "two" / "art").symlink_to(tmp_path / "one" / "art")  # the same artifact store
    (stored,) = (tmp_path / "one" / "art" / "calibrations").glob("*.json")
    key = f"calibrations/{stored.name}"
    store = LocalArtifactStore(str(tmp_path / "one" / "art"))
    record = json.loads(asyncio.run(store.get(key)))
    assert record["allowed"] == []
    finding = {**record, "allowed": ["the tests called gc.get_objects"]}
    asyncio.run(store.put(key, json.dumps(finding).encode()))
    walk = "import gc\n_walked = gc.get_objects()\n\ndef add(a, b):\n    return a + b\n"
    (t,) = run_attack(tmp_path / "two", tasks, [write("calc.py", walk)])
    assert t.reward == 1.0, t.grade
    assert not t.grade["tampered"]
