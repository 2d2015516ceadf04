"""A gold Harbor sample scores 1 whatever the machine does, or its grading is an
infrastructure failure: never a 0 blamed on the agent.

Two causes of a gold 0 found under load, each shown here on real containers:
``serve-status`` serves on 127.0.0.1, which a run's network ``none`` refuses
(seccomp, no IP sockets) unless the grader gives Harbor tasks their own
loopback; and an engine that loses an exec's output while reporting exit 0
(about once in 300 reads on a loaded Podman) made the reward read come back
empty, which read as "reward.txt is not a number", reward 0. The loss is
replayed here by dropping the output of the real sandbox's reward reads."""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from megaflow.core.errors import SandboxError
from megaflow.core.trajectory import Trajectory
from megaflow.datasets.harbor import HarborTask, image_tag, read_tasks, task_payload
from megaflow.environment.abstract import EnvironmentSpec, ExecResult, Runtime, Sandbox
from megaflow.environment.container.build import build_images
from megaflow.grading.config import ScriptGraderConfig
from megaflow.grading.reward import reward_of
from tests.grading.conftest import task_of

pytestmark = [pytest.mark.container, pytest.mark.slow]

MINI = Path(__file__).resolve().parents[2] / "tasks" / "harbor-mini"
BASE = "localhost/megaflow-base:latest"


class LosesReads:
    """A real sandbox whose engine loses the output of its first ``lost`` reads of
    ``reward.txt``, still reporting their exit code, as a loaded Podman did."""

    def __init__(self, inner: Sandbox, lost: int) -> None:
        self.inner, self.lost, self.reads = inner, lost, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def exec(self, command: str | list[str], **kw: Any) -> ExecResult:
        res = await self.inner.exec(command, **kw)
        if "head -c" in str(command) and "reward.txt" in str(command):
            self.reads += 1
            if self.reads <= self.lost:
                return res.model_copy(update={"stdout": "", "stderr": ""})
        return res


def _mini(podman_service: Any, name: str) -> HarborTask:
    tagged = podman_service.podman("tag", podman_service.image, BASE)
    assert tagged.returncode == 0, tagged.stderr
    task = next(t for t in read_tasks(MINI) if t.name == name)
    assert task.context is not None
    build_images(podman_service.url, [(Path(task.context), image_tag(task))])
    return task


async def _graded(
    rt: Runtime, task: HarborTask, agent: str, base: EnvironmentSpec, lost: int = 0
) -> tuple[float, Any, LosesReads | None]:
    spec_task = task_of(task_payload(task), task.name)
    grader = ScriptGraderConfig().build()
    spec = grader.sandbox_spec(spec_task, base)
    seen: list[LosesReads] = []

    @contextlib.asynccontextmanager
    async def fresh() -> AsyncIterator[Sandbox]:
        box = await rt.create(spec)
        try:
            if lost:
                seen.append(LosesReads(box, lost))
                yield seen[-1]  # type: ignore[misc]
            else:
                yield box
        finally:
            await box.destroy()

    async with fresh() as box, grader.attempt(spec_task, spec, fresh) as attempt:
        await attempt.prepare(box)
        res = await box.exec(agent, timeout=120)
        assert res.ok, res.stderr
        taken = await attempt.take(box, Trajectory(id="t", task_id=spec_task.id, run_id="run"))
    report = await attempt.grade(taken)
    return reward_of(report), report, seen[-1] if seen else None


def _gold(task: HarborTask) -> str:
    return f"cd /app && sh -c {shlex.quote(task.solution['solve.sh'])}"


async def test_a_service_task_is_graded_on_a_run_without_network(
    podman_service: Any, container: tuple[Runtime, str]
) -> None:
    rt, _ = container
    task = _mini(podman_service, "serve-status")
    base = EnvironmentSpec()
    assert base.network == "none"  # the run's default: no IP sockets at all
    reward, report, _ = await _graded(rt, task, _gold(task), base)
    assert reward == 1.0, report.output  # without its loopback: httpd: socket: not permitted
    spec = ScriptGraderConfig().build().sandbox_spec(task_of(task_payload(task)), base)
    assert spec.network == "loopback"  # its own lo, as Harbor's containers have
    reward, report, _ = await _graded(rt, task, "true", base)  # nothing configured
    assert reward == 0.0
    assert report.error is None  # a graded 0, by the task's own test
    host = (
        ScriptGraderConfig()
        .build()
        .sandbox_spec(task_of(task_payload(task)), EnvironmentSpec(network="host"))
    )
    assert host.network == "host"  # the run's network otherwise stands


async def test_a_reward_read_whose_output_was_lost_is_read_again(
    podman_service: Any, container: tuple[Runtime, str]
) -> None:
    rt, _ = container
    task = _mini(podman_service, "hello-file")
    reward, report, box = await _graded(rt, task, _gold(task), EnvironmentSpec(), lost=1)
    assert box is not None
    assert box.reads >= 2  # the lost read, then one that held
    assert reward == 1.0, report.error
    assert report.error is None


async def test_reward_reads_lost_every_time_are_infrastructure_not_a_zero(
    podman_service: Any, container: tuple[Runtime, str]
) -> None:
    rt, _ = container
    task = _mini(podman_service, "hello-file")
    with pytest.raises(SandboxError, match="lost its output") as err:
        await _graded(rt, task, _gold(task), EnvironmentSpec(), lost=100)
    assert isinstance(err.value, SandboxError)  # an InfraError: the scheduler retries it
