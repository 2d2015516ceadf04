"""The ``script`` grader on real containers: the verifier runs in a fresh sandbox
against the agent's final files, and reads its reward where only it can write."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from megaflow.core.trajectory import Trajectory
from megaflow.datasets.harbor import HarborTask
from megaflow.environment.abstract import EnvironmentSpec, Runtime, Sandbox
from megaflow.grading.config import ScriptGraderConfig
from megaflow.grading.reward import reward_of
from megaflow.grading.script import verify
from tests.grading.conftest import task_of

pytestmark = [pytest.mark.container, pytest.mark.slow]

# Writes the reward only when the answer is right: a reward file already there
# would stand (the shape of many Harbor verifiers).
ONLY_ON_SUCCESS = """#!/bin/sh
if [ "$(cat /app/answer.txt 2>/dev/null)" = 42 ]; then echo 1 > /logs/verifier/reward.txt; fi
"""


def harbor(image: str, test_sh: str = ONLY_ON_SUCCESS, **extra: Any) -> HarborTask:
    return HarborTask(name="answer", instruction="Write 42 to /app/answer.txt.", image=image,
                      tests={"test.sh": test_sh, **extra})  # fmt: skip


def fresh_of(rt: Runtime, spec: EnvironmentSpec) -> Any:
    @contextlib.asynccontextmanager
    async def fresh() -> AsyncIterator[Sandbox]:
        sandbox = await rt.create(spec)
        try:
            yield sandbox
        finally:
            await sandbox.destroy()

    return fresh


async def graded(
    rt: Runtime, image: str, task: HarborTask, agent: str, files: dict[str, str] | None = None
) -> tuple[float, Any]:
    """Run ``agent`` (a shell script) as the agent, then grade it as the attempt does;
    the reward, and the agent's sandbox kept alive for the caller to inspect."""
    spec_task = task_of({"megaflow_harbor": task.model_dump(mode="json")})
    grader = ScriptGraderConfig().build()
    spec = grader.sandbox_spec(spec_task, EnvironmentSpec(image=image, files=files or {}))
    assert spec.workdir == "/app"
    assert spec.image == image
    fresh = fresh_of(rt, spec)
    async with fresh() as sandbox, grader.attempt(spec_task, spec, fresh) as attempt:
        await attempt.prepare(sandbox)
        res = await sandbox.exec(agent, timeout=30)
        assert res.exit_code == 0, res.stderr
        taken = await attempt.take(sandbox, Trajectory(id="x", task_id="t", run_id="r"))
        report = await attempt.grade(taken)
    return reward_of(report), report


async def test_right_answer_earns_the_reward(container: tuple[Runtime, str]) -> None:
    rt, image = container
    reward, report = await graded(rt, image, harbor(image), "echo 42 > /app/answer.txt")
    assert reward == 1.0, report
    assert report.resolved
    reward, report = await graded(rt, image, harbor(image), "echo 41 > /app/answer.txt")
    assert reward == 0.0
    assert report.error == "the verifier wrote no reward.txt or reward.json"


ATTACK = """echo 41 > /app/answer.txt
mkdir -p /logs/verifier /tests && echo 1 > /logs/verifier/reward.txt
echo '{"reward": 1}' > /logs/verifier/reward.json
printf '#!/bin/sh\\necho 1 > /logs/verifier/reward.txt\\n' > /tests/test.sh
(while true; do echo 1 > /logs/verifier/reward.txt 2>/dev/null; sleep 0.05; done) \
  > /dev/null 2>&1 &
"""


async def test_an_agent_that_writes_the_reward_itself_earns_nothing(
    container: tuple[Runtime, str],
) -> None:
    rt, image = container
    task = harbor(image)
    # Where the defence does not apply (the verifier in the agent's own sandbox,
    # its reward folder as the agent left it), the attack earns the reward.
    async with await rt.create(EnvironmentSpec(image=image, workdir="/app")) as box:
        await box.exec(ATTACK, timeout=30)
        in_place = await verify(box, task, ScriptGraderConfig(), clear=False)
        assert reward_of(in_place) == 1.0
    # Graded as the grader does: a fresh sandbox, only the agent's files carried.
    reward, report = await graded(rt, image, task, ATTACK)
    assert reward == 0.0, report
    assert not report.resolved


async def test_files_the_agent_deleted_stay_deleted(container: tuple[Runtime, str]) -> None:
    rt, image = container
    check = "#!/bin/sh\n[ -e /app/keep ] || echo 1 > /logs/verifier/reward.txt\n"
    task = harbor(image, check)
    files = {"keep": "placed in every sandbox of the task"}
    reward, _ = await graded(rt, image, task, "rm /app/keep", files)
    assert reward == 1.0
    reward, _ = await graded(rt, image, task, "true", files)
    assert reward == 0.0


async def test_named_rewards_from_reward_json(container: tuple[Runtime, str]) -> None:
    rt, image = container
    named = json.dumps({"correct": 1, "style": 0.5})
    task = harbor(image, f"#!/bin/sh\necho '{named}' > /logs/verifier/reward.json\n")
    reward, report = await graded(rt, image, task, "true")
    assert report.rewards == {"correct": 1.0, "style": 0.5}
    assert reward == 0.75
    bad = harbor(image, '#!/bin/sh\necho \'{"a": "x"}\' > /logs/verifier/reward.json\n')
    reward, report = await graded(rt, image, bad, "true")
    assert reward == 0.0
    assert "named numbers" in (report.error or "")


async def test_a_verifier_past_its_time_is_reward_zero(container: tuple[Runtime, str]) -> None:
    rt, image = container
    task = harbor(image, "#!/bin/sh\necho 1 > /logs/verifier/reward.txt\nsleep 60\n")
    task = task.model_copy(update={"verifier_timeout_s": 2.0})
    reward, report = await graded(rt, image, task, "true")
    assert reward == 0.0
    assert "ran past 2 s" in (report.error or "")
