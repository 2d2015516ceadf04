"""The Agent Service interface: an agent runs one task in a sandbox with a model.

:meth:`Agent.run` is a template: it registers the task with the model client
(so the ``replay`` backend and the gateway's recording know the trajectory),
runs the adapter's loop, and always closes the trajectory: end time, exit
status, and the model calls the gateway recorded, merged in time order with
the agent's actions and observations. The caller may pass its own
:class:`Trajectory`, so that it keeps what was recorded even when ``run``
raises.

Errors: an exception from the adapter's own code becomes :class:`AgentError`
(final, never retried); MegaFlow errors from below pass through unchanged
(TransportError and SandboxError are infrastructure, retried by the
scheduler; ModelError and MegaFlowTimeout end the task with that error).
"""

from __future__ import annotations

import abc
import asyncio
import logging
import time
import uuid
from typing import Any, Literal

from megaflow.core.errors import AgentError, MegaFlowError
from megaflow.core.tasks import ErrorKind, Outcome, TaskSpec, classify
from megaflow.core.trajectory import Trajectory
from megaflow.environment.abstract import Sandbox
from megaflow.model.abstract import ModelClient

log = logging.getLogger(__name__)

ExitStatus = Literal["submitted", "step_limit", "token_limit", "time_limit", "error"]


def error_kind(exc: BaseException) -> ErrorKind:
    """How the scheduler treats a failure (classified by :func:`~megaflow.core.tasks.classify`,
    as the scheduler does): only ``infra`` is retried."""
    outcome = classify(exc)
    if outcome is Outcome.LOST:
        return ErrorKind.INFRA_LOST
    return outcome.error_kind or ErrorKind.AGENT


def is_retryable(exc: BaseException) -> bool:
    return error_kind(exc) in (ErrorKind.INFRA, ErrorKind.INFRA_LOST)


def new_trajectory(task: TaskSpec, attempt: int = 1) -> Trajectory:
    """A fresh trajectory; its id names the run, the task and the attempt, plus a
    random suffix so that no two attempts share recorded calls."""
    base = task.id if task.id.startswith(f"{task.run_id}/") else f"{task.run_id}/{task.id}"
    tid = f"{base}/a{attempt}-{uuid.uuid4().hex[:6]}"
    return Trajectory(id=tid, task_id=task.id, run_id=task.run_id, attempt=attempt)


def problem_statement(task: TaskSpec) -> str:
    """The instructions an agent gets: the payload's problem statement or prompt."""
    for key in ("problem_statement", "prompt", "instructions"):
        value = task.payload.get(key)
        if isinstance(value, str) and value.strip():
            return value
    raise AgentError(
        f"task {task.id!r} has no 'problem_statement' (or 'prompt') in its payload; "
        "the agent has nothing to do"
    )


class Agent(abc.ABC):
    """Runs one task: ``await agent.run(task, sandbox, model_client)``."""

    name: str = "agent"

    async def run(
        self,
        task: TaskSpec,
        sandbox: Sandbox,
        model: ModelClient,
        trajectory: Trajectory | None = None,
    ) -> Trajectory:
        traj = trajectory or new_trajectory(task)
        traj.meta.setdefault("agent", self.name)
        traj.meta.setdefault("sandbox", sandbox.id)
        try:
            await model.register(traj.id, task.payload)
            status = await self._run(task, sandbox, model, traj)
            traj.meta["exit_status"] = status
        except BaseException as exc:
            if isinstance(exc, MegaFlowError | asyncio.CancelledError):
                failure: BaseException = exc
            elif isinstance(exc, Exception):
                failure = AgentError(f"agent {self.name!r} failed on task {task.id!r}: {exc!r}")
                failure.__cause__ = exc
            else:
                failure = exc
            traj.meta["exit_status"] = "error"
            traj.meta["error"] = str(failure)
            traj.meta["error_type"] = type(failure).__name__
            traj.meta["error_kind"] = error_kind(failure).value
            await self._close(traj, model)
            if failure is exc:
                raise
            raise failure from exc
        await self._close(traj, model)
        return traj

    async def _close(self, traj: Trajectory, model: ModelClient) -> None:
        traj.ended_at = time.time()
        try:
            calls = await asyncio.shield(model.calls(traj.id))
        except Exception as exc:  # the trajectory is still worth keeping
            log.warning("could not fetch recorded model calls of %s: %s", traj.id, exc)
            traj.meta["model_calls_lost"] = str(exc)
            return
        merged: list[Any] = [*traj.steps, *calls]
        merged.sort(key=lambda s: s.started_at)
        traj.steps = merged
        traj.meta["steps"] = len(calls)
        traj.meta["tokens"] = traj.tokens

    @abc.abstractmethod
    async def _run(
        self, task: TaskSpec, sandbox: Sandbox, model: ModelClient, traj: Trajectory
    ) -> ExitStatus:
        """The agent loop. Appends actions and observations to ``traj``."""
