"""The ``python`` grader: a reward function by dotted path, on the host, against the
agent's answer read as data from a real (bubblewrap) sandbox."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from megaflow.core.trajectory import ModelCall, Trajectory
from megaflow.environment.abstract import EnvironmentSpec, Sandbox
from megaflow.grading.config import PythonGraderConfig
from megaflow.grading.reward import reward_of
from tests.environment.conftest import local_runtime
from tests.grading.conftest import task_of

FN = "tests.grading.rewards_for_tests"


async def grade(tmp_path: Path, cfg: PythonGraderConfig, agent: str, answer: int = 42) -> object:
    rt = local_runtime(tmp_path)
    await rt.start()
    task = task_of({"problem_statement": "What is 6 * 7?", "answer": answer})
    grader = cfg.build()

    @contextlib.asynccontextmanager
    async def fresh() -> AsyncIterator[Sandbox]:
        raise AssertionError("the python grader needs no sandbox of its own")
        yield  # pragma: no cover

    try:
        spec = EnvironmentSpec()
        async with await rt.create(spec) as sandbox, grader.attempt(task, spec, fresh) as attempt:
            await sandbox.exec(agent, timeout=30)
            traj = Trajectory(id="x", task_id="t", run_id="r")
            traj.add(ModelCall(response={"message": {"content": " 41\n"}}))
            return await attempt.grade(await attempt.take(sandbox, traj))
    finally:
        await rt.stop()


async def test_answer_file_is_graded_by_the_named_function(tmp_path: Path) -> None:
    cfg = PythonGraderConfig(function=f"{FN}.exact_match")
    report = await grade(tmp_path, cfg, "echo 42 > answer.txt")
    assert reward_of(report) == 1.0  # type: ignore[arg-type]
    report = await grade(tmp_path, cfg, "echo 41 > answer.txt")
    assert reward_of(report) == 0.0  # type: ignore[arg-type]


async def test_no_answer_and_a_crashing_function_are_reward_zero(tmp_path: Path) -> None:
    report = await grade(tmp_path, PythonGraderConfig(function=f"{FN}.exact_match"), "true")
    assert reward_of(report) == 0.0
    assert "no answer" in report.error
    cfg = PythonGraderConfig(function=f"{FN}.crashes")
    report = await grade(tmp_path, cfg, "echo > answer.txt")
    assert reward_of(report) == 0.0  # type: ignore[arg-type]
    assert "ZeroDivisionError" in report.error  # type: ignore[attr-defined]


async def test_named_rewards_and_the_last_message(tmp_path: Path) -> None:
    cfg = PythonGraderConfig(function=f"{FN}.graded_parts", on="message")
    report = await grade(tmp_path, cfg, "echo 42 > answer.txt", answer=41)
    # the last message (41) is graded, not the file the agent wrote (42)
    assert report.rewards == {"correct": 1.0, "short": 1.0}  # type: ignore[attr-defined]
    assert reward_of(report) == 1.0  # type: ignore[arg-type]
    report = await grade(tmp_path, cfg, "true", answer=42)
    assert report.rewards == {"correct": 0.0, "short": 1.0}  # type: ignore[attr-defined]
    assert reward_of(report) == 0.5  # type: ignore[arg-type]  # no "reward": their mean


def test_a_bad_function_path_is_a_config_error() -> None:
    with pytest.raises(ValidationError, match="no attribute 'missing'"):
        PythonGraderConfig(function=f"{FN}.missing")
    with pytest.raises(ValidationError, match="not callable"):
        PythonGraderConfig(function=f"{FN}.NOT_CALLABLE")
    with pytest.raises(ValidationError, match="cannot import module"):
        PythonGraderConfig(function="no_such_module_here.fn")
