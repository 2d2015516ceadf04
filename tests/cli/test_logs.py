"""`megaflow logs TASK [--follow]`: attempts, stored steps and grade of one task."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

from typer.testing import CliRunner

from megaflow.cli.main import app
from megaflow.core.states import TaskState as S
from megaflow.core.tasks import Attempt, RunSpec, TaskResult, TaskSpec
from megaflow.core.trajectory import Action, ModelCall, Observation, Trajectory
from megaflow.datasets.grading import GradeReport, TestOutcome
from megaflow.storage.abstract import Transition
from megaflow.storage.local_artifacts import LocalArtifactStore
from megaflow.storage.sqlite import SqliteMetadataStore

runner = CliRunner()
TASK = "r1/fix-bug/0"
CHAIN = [S.SCHEDULED, S.STARTING, S.RUNNING, S.GRADING, S.SUCCEEDED]


async def _seed(db: Path, root: Path, finish: bool) -> None:
    async with SqliteMetadataStore(str(db)) as s, LocalArtifactStore(root) as art:
        await s.create_run(RunSpec(id="r1"))
        await s.add_tasks([TaskSpec(id=TASK, run_id="r1")])
        if not finish:
            return
        await s.transition_many([Transition(TASK, x) for x in CHAIN])
        t0 = time.time()
        await s.put_attempt(Attempt(task_id=TASK, number=1, sandbox="sb-7", started_at=t0,
                                    ended_at=t0 + 2.5))  # fmt: skip
        traj = Trajectory(id="tr", task_id=TASK, run_id="r1", steps=[
            ModelCall(response={"message": {"content": "Let me look at the code.",
                                            "tool_calls": [{"function": {"name": "bash"}}]}},
                      prompt_tokens=120, completion_tokens=9),
            Action(tool="bash", arguments={"command": "pytest -q"}),
            Observation(content="1 failed, 3 passed", exit_code=1),
        ])  # fmt: skip
        grade = GradeReport(
            instance_id="fix-bug", resolved=False, reward=0.0,
            fail_to_pass=TestOutcome(failed=["tests/test_x.py::test_bug"]),
            pass_to_pass=TestOutcome(passed=["tests/test_x.py::test_ok"]),
            statuses={"tests/test_x.py::test_bug": "FAILED", "tests/test_x.py::test_ok": "PASSED"},
            test_exit_code=1, test_output="E   assert 2 == 3",
        )  # fmt: skip
        prefix = "runs/r1/tasks/fix-bug/attempt-1"
        await art.put(f"{prefix}/trajectory.json", traj.model_dump_json().encode())
        await art.put(f"{prefix}/grade.json", grade.model_dump_json().encode())
        keys = {"trajectory": f"{prefix}/trajectory.json", "grade": f"{prefix}/grade.json"}
        await s.put_result(TaskResult(task_id=TASK, success=False, reward=0.0, artifacts=keys))


def test_logs_prints_attempts_steps_and_grade(tmp_path: Path) -> None:
    db, root = tmp_path / "m.db", tmp_path / "art"
    asyncio.run(_seed(db, root, finish=True))
    res = runner.invoke(app, ["logs", TASK, "--db", str(db), "--artifacts", str(root)],
                        env={"COLUMNS": "200"})  # fmt: skip
    assert res.exit_code == 0, res.output
    out = res.output
    assert "sb-7" in out
    assert "2.50 s" in out
    assert "state succeeded: unresolved, reward 0.000" in out
    steps = [line.split()[1] for line in out.splitlines() if line[:3].strip().isdigit()]
    assert steps == ["model", "action", "output"]
    assert "120+9 tok" in out
    assert "Let me look at the code. -> bash" in out
    assert 'bash {"command": "pytest -q"}' in out
    assert "1 failed, 3 passed" in out
    assert "grade: unresolved, reward 0.000; FAIL_TO_PASS 0 passed / 1 failed" in out
    assert "FAILED   tests/test_x.py::test_bug" in out
    assert "E   assert 2 == 3" in out
    missing = runner.invoke(app, ["logs", "r1/none/0", "--db", str(db)])
    assert missing.exit_code == 2
    assert "r1/none/0" in missing.output


def test_follow_polls_until_the_task_ends(tmp_path: Path) -> None:
    db, root = tmp_path / "m.db", tmp_path / "art"
    asyncio.run(_seed(db, root, finish=False))

    async def progress() -> None:
        async with SqliteMetadataStore(str(db)) as s:
            for state in CHAIN:
                await asyncio.sleep(0.1)
                await s.transition(TASK, state)

    mover = threading.Thread(target=asyncio.run, args=(progress(),))
    mover.start()
    res = runner.invoke(app, ["logs", TASK, "-f", "--interval", "0.05", "--db", str(db),
                              "--artifacts", str(root)])  # fmt: skip
    mover.join()
    assert res.exit_code == 0, res.output
    seen = [line.split()[1] for line in res.output.splitlines() if line[:2].isdigit()]
    assert seen[0] == "queued"
    assert seen[-1] == "succeeded"
    assert len(seen) >= 3  # it saw the task move, not only its end
