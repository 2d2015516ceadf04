"""The grader seam: what turns an attempt's final state into a reward.

Every grader has the same three steps, each a method of the
:class:`GradingAttempt` its :class:`Grader` opens for one attempt:

* ``prepare(sandbox)``: put the task into the agent's sandbox (a repository at
  its base commit; or nothing, when the image already holds the task);
* ``take(sandbox, trajectory)``: once the agent is done, kill every process
  it left and take what is graded (a patch, the final files, the final
  answer) as bytes the host keeps; nothing of the agent's sandbox is used
  after this;
* ``grade(taken)``: grade that in a fresh sandbox the grader asks for through
  ``fresh`` (never the agent's), or on the host, and return a :class:`Report`.

The reward of a report is :func:`megaflow.grading.reward.reward_of`, the one
rule every caller (the attempt, the training data, the rollouts) uses. A
grader is built from its ``grading`` config (:mod:`megaflow.grading.config`);
the caller never branches on which one it has.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from megaflow.core.tasks import TaskSpec
from megaflow.core.trajectory import Trajectory
from megaflow.environment.abstract import EnvironmentSpec, Sandbox

FreshSandbox = Callable[[], AbstractAsyncContextManager[Sandbox]]
"""Opens a fresh sandbox of the task's spec, given back on every path when closed."""


class Report(Protocol):
    """What every grade report says (the SWE-bench report has more)."""

    @property
    def resolved(self) -> bool: ...
    @property
    def reward(self) -> float: ...
    @property
    def tampered(self) -> bool: ...
    @property
    def error(self) -> str | None: ...
    def model_dump_json(self) -> str: ...


class Verdict(BaseModel):
    """The report of a grader other than ``swebench``."""

    model_config = ConfigDict(extra="forbid")

    grader: str = Field(description="The grader's type tag.")
    resolved: bool = False
    reward: float = Field(0.0, description="The reward (``rewards['reward']``, or their mean).")
    rewards: dict[str, float] = Field(
        default_factory=dict, description="Named rewards, as the verifier gave them."
    )
    tampered: bool = False
    error: str | None = None
    exit_code: int | None = None
    output: str = Field("", description="The tail of what the verifier printed.")
    duration_s: float = 0.0


@dataclass(frozen=True)
class Taken:
    """What the grader took from the agent's sandbox: bytes kept on the host."""

    data: bytes
    artifact: str
    """The artifact's file name (``patch.diff``, ``state.tar``, ``answer.txt``)."""
    error: str | None = None
    """Why nothing could be taken (graded as unresolved)."""


class GradingAttempt(Protocol):
    """One attempt's grading; closed on every path (``async with``)."""

    times: dict[str, float]
    """What grading took, by name (``grade_sandbox_start_s``, ``grade_prepare_s``)."""

    async def __aenter__(self) -> GradingAttempt: ...
    async def __aexit__(self, *exc: object) -> None: ...
    async def prepare(self, sandbox: Sandbox) -> None: ...
    async def take(self, sandbox: Sandbox, trajectory: Trajectory) -> Taken: ...
    async def grade(self, taken: Taken) -> Report: ...


class Grader(Protocol):
    """A way of grading one kind of task, built from its config."""

    def grades(self, task: TaskSpec) -> bool:
        """Whether this grader can grade ``task`` (its payload has what it needs)."""
        ...

    def sandbox_spec(self, task: TaskSpec, base: EnvironmentSpec) -> EnvironmentSpec:
        """The sandbox the task's agent and its grading run in."""
        ...

    def attempt(self, task: TaskSpec, spec: EnvironmentSpec, fresh: FreshSandbox) -> GradingAttempt:
        """The grading of one attempt of ``task``, whose sandboxes are of ``spec``."""
        ...
