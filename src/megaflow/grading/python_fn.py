"""The ``python`` grader: a reward function named by dotted path, run on the host.

For math, QA and format rewards. The function is loaded by the one plug-in
loader (:func:`megaflow.core.plugins.load_object`) from the run's config,
never from anything the agent wrote, and is called with the task's payload
and the agent's answer as a string: the file ``answer_file`` of its workdir
(read as bytes, after every process of the sandbox is dead), its last
message, or its patch. ``fn(payload, answer)`` returns a number or named
numbers (their ``reward``, or their mean), synchronously or as a coroutine.
A function that raises or runs past ``timeout_s`` on an answer gives reward
0 with the reason: the answer is the agent's, so what it causes is the
agent's sample.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from typing import Any

from megaflow.core.errors import PluginError
from megaflow.core.plugins import load_object
from megaflow.core.tasks import TaskSpec
from megaflow.core.trajectory import Trajectory
from megaflow.environment.abstract import EnvironmentSpec, Sandbox
from megaflow.grading.abstract import FreshSandbox, Taken, Verdict
from megaflow.grading.answer import take_answer
from megaflow.grading.config import PythonGraderConfig
from megaflow.grading.reward import clamp, combined


class PythonGrader:
    def __init__(self, cfg: PythonGraderConfig) -> None:
        self.cfg = cfg
        fn = load_object(cfg.function)
        if not callable(fn):
            raise PluginError(f"grading.function {cfg.function!r} is not callable")
        self.fn: Callable[..., Any] = fn

    def grades(self, task: TaskSpec) -> bool:
        return True

    def sandbox_spec(self, task: TaskSpec, base: EnvironmentSpec) -> EnvironmentSpec:
        return base

    def attempt(self, task: TaskSpec, spec: EnvironmentSpec, fresh: FreshSandbox) -> PythonAttempt:
        return PythonAttempt(self, task)


class PythonAttempt:
    def __init__(self, grader: PythonGrader, task: TaskSpec) -> None:
        self.cfg, self.fn, self.task = grader.cfg, grader.fn, task
        self.times: dict[str, float] = {}

    async def __aenter__(self) -> PythonAttempt:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def prepare(self, sandbox: Sandbox) -> None:
        """Nothing: the task is its prompt."""

    async def take(self, sandbox: Sandbox, trajectory: Trajectory) -> Taken:
        cfg = self.cfg
        return await take_answer(
            sandbox, trajectory, self.task,
            on=cfg.on, answer_file=cfg.answer_file, cap=cfg.max_answer_kb * 1024,
        )  # fmt: skip

    async def grade(self, taken: Taken) -> Verdict:
        if taken.error is not None:
            return Verdict(grader="python", error=taken.error)
        t0 = time.monotonic()
        answer = taken.data.decode(errors="replace")
        try:
            async with asyncio.timeout(self.cfg.timeout_s):
                value = self.fn(dict(self.task.payload), answer)
                if inspect.isawaitable(value):
                    value = await value
        except TimeoutError:
            return Verdict(
                grader="python", error=f"{self.cfg.function} ran past {self.cfg.timeout_s:g} s"
            )
        except Exception as exc:  # the answer's doing: reward 0, with why
            return Verdict(
                grader="python", error=f"{self.cfg.function} raised {type(exc).__name__}: {exc}"
            )
        if isinstance(value, dict):
            named = {str(k): clamp(v) for k, v in value.items()}
            reward = combined(named)
        else:
            named, reward = {}, clamp(value)
        return Verdict(
            grader="python", reward=reward, rewards=named, resolved=reward >= 1.0,
            duration_s=time.monotonic() - t0,
        )  # fmt: skip
